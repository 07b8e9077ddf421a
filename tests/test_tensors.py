"""as_torch=True: zero-copy CPU tensors over the shared memory; CUDA delivery where a GPU is present."""

from __future__ import annotations

import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch: the 'torch' extra (pip install -e '.[torch]')")

from rlbench_vec.engine.tensors import TensorConverter, address_span, import_torch  # noqa: E402
from rlbench_vec.errors import ConfigError  # noqa: E402  (torch first: the module is skipped without it)

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
SMALL = dict(cameras=("front",), image_size=(16, 16), num_envs=3)


def same_memory(tensor, array: np.ndarray) -> bool:
    return tensor.data_ptr() == array.__array_interface__["data"][0]


def fake_result(views: dict[str, np.ndarray], n: int, **info) -> tuple:
    return dict(views), np.arange(n, dtype=np.float64), np.zeros(n, bool), np.ones(n, bool), dict(info)


# ---------------------------------------------------------------- the converter alone


def test_converter_hands_out_the_same_zero_copy_tensors_for_full_batches():
    views = {"rgb": np.zeros((2, 4, 4, 3), np.uint8), "pose": np.zeros((2, 7))}
    convert = TensorConverter([views, views])
    obs, reward, terminated, truncated, info = convert(fake_result(views, 2), page=0, whole_page=True)
    assert all(same_memory(obs[k], views[k]) for k in views)
    assert obs["rgb"].dtype == torch.uint8 and obs["pose"].dtype == torch.float64
    views["pose"][1, 3] = 5.0  # a worker writing the next observation shows through
    assert obs["pose"][1, 3] == 5.0
    again = convert(fake_result(views, 2), page=0, whole_page=True)[0]
    assert all(again[k] is obs[k] for k in views)  # made once, reused
    assert reward.tolist() == [0.0, 1.0] and terminated.dtype == torch.bool and truncated.all()
    assert info == {}


def test_converter_converts_copies_without_touching_the_shared_views():
    views = {"pose": np.arange(14.0).reshape(2, 7)}
    convert = TensorConverter([views, views])
    gathered = {"pose": views["pose"][[1]]}  # what a partial recv or copy_obs=True hands over
    obs, reward, *_ = convert(
        (gathered, np.zeros(1), np.zeros(1, bool), np.zeros(1, bool), {}), page=0, whole_page=False
    )
    assert obs["pose"].tolist() == [views["pose"][1].tolist()]
    assert same_memory(obs["pose"], gathered["pose"]) and not same_memory(obs["pose"], views["pose"])


def test_converter_turns_per_step_info_into_tensors_and_keeps_metadata():
    views = {"pose": np.zeros((2, 7))}
    chunk = {"pose": np.zeros((2, 4, 7))}
    executed = np.ones((2, 4), bool)
    _, _, _, _, info = TensorConverter([views, views])(
        fake_result(views, 2, executed=executed, chunk_observations=chunk, env_id=np.arange(2)), page=0, whole_page=True
    )
    assert info["executed"].dtype == torch.bool and info["executed"].shape == (2, 4)
    assert same_memory(info["chunk_observations"]["pose"], chunk["pose"])
    assert isinstance(info["env_id"], np.ndarray)


def test_address_span_covers_every_view():
    block = np.zeros(1000, np.uint8)
    views = {"a": block[100:200], "b": block[600:700].view(np.float32)}
    start, size = address_span(views)
    assert start == block.ctypes.data + 100 and size == 600


def test_missing_torch_is_a_config_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(ConfigError, match="needs PyTorch"):
        import_torch()


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_device_without_cuda_is_a_config_error(make_env):
    with pytest.raises(ConfigError, match="torch.cuda is not available"):
        make_env(as_torch=True, device="cuda", **SMALL)


def test_device_needs_as_torch():
    with pytest.raises(ConfigError, match="needs as_torch=True"):
        from rlbench_vec import RLBenchVectorEnv

        RLBenchVectorEnv(backend="synthetic", device="cpu")


# ---------------------------------------------------------------- through the vector env (CPU)


def test_step_returns_tensors_over_shared_memory(make_env):
    env = make_env(as_torch=True, **SMALL)
    reference = make_env(**SMALL)  # same seeds, numpy
    obs, info = env.reset(seed=4)
    ref_obs, _ = reference.reset(seed=4)
    assert set(obs) == set(ref_obs) and "descriptions" in info
    actions = np.random.default_rng(0).uniform(-1, 1, (3, 8))
    pages = [obs]
    for _ in range(4):
        step = env.step(actions)
        ref = reference.step(actions)
        assert all(np.array_equal(step[0][k].numpy(), ref[0][k]) for k in obs)
        for tensor, array in zip(step[1:4], ref[1:4]):
            assert isinstance(tensor, torch.Tensor) and np.array_equal(tensor.numpy(), array)
        pages.append(step[0])
    # two pages in turn, each a set of tensors made once over shared memory: no copies
    assert all(pages[2][k] is pages[0][k] and pages[3][k] is pages[1][k] for k in obs)
    assert not any(np.shares_memory(pages[0][k].numpy(), pages[1][k].numpy()) for k in obs)


def test_copy_obs_gives_fresh_tensors(make_env):
    env = make_env(as_torch=True, copy_obs=True, **SMALL)
    first, _ = env.reset(seed=0)
    kept = first["front_rgb"].clone()
    second = env.step(np.zeros((3, 8)))[0]
    third = env.step(np.zeros((3, 8)))[0]
    assert not np.shares_memory(third["front_rgb"].numpy(), first["front_rgb"].numpy())
    assert torch.equal(first["front_rgb"], kept) and not torch.equal(first["front_rgb"], second["front_rgb"])


def test_partial_batches_are_tensors_of_the_returned_envs(make_env):
    env = make_env(as_torch=True, **SMALL)
    env.reset(seed=0)
    env.step(np.zeros((3, 8)))
    env.send(np.zeros((2, 8)), env_ids=[0, 2])
    obs, reward, terminated, truncated, info = env.recv()
    assert sorted(info["env_id"].tolist()) == [0, 2]
    assert obs["joint_positions"].shape == (2, 7) and reward.shape == (2,)
    assert obs["task_low_dim_state"][:, 0].tolist() == [2.0, 2.0]  # both envs' second step


def test_step_chunk_tensors(make_env):
    env = make_env(as_torch=True, chunk_obs="all", max_chunk=4, backend_options={"episode_length": 2}, **SMALL)
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step_chunk(np.zeros((3, 4, 8)))
    assert reward.shape == (3, 4) and terminated[:, 1].all()
    assert info["executed"].tolist() == [[True, True, False, False]] * 3
    assert info["chunk_observations"]["joint_positions"].shape == (3, 4, 7)


# ---------------------------------------------------------------- CUDA (skipped without a GPU)


@needs_cuda
def test_cuda_delivery_matches_cpu(make_env):
    env = make_env(as_torch=True, device="cuda", **SMALL)
    reference = make_env(**SMALL)
    assert env._output.to_tensors.pinned, "the shared observations should be registered as pinned memory"
    obs, _ = env.reset(seed=1)
    reference.reset(seed=1)
    actions = np.random.default_rng(1).uniform(-1, 1, (3, 8))
    for _ in range(3):
        obs, reward, terminated, truncated, info = env.step(actions)
        ref = reference.step(actions)
        assert isinstance(info["cuda_event"], torch.cuda.Event)
        assert all(obs[k].is_cuda and np.array_equal(obs[k].cpu().numpy(), ref[0][k]) for k in obs)
        assert reward.is_cuda and np.array_equal(reward.cpu().numpy(), ref[1])
    kept = obs["joint_positions"].clone()
    env.step(actions)
    assert torch.equal(obs["joint_positions"], kept)  # device tensors are fresh each step


@needs_cuda
def test_cuda_event_orders_other_streams_and_the_host(make_env):
    env = make_env(as_torch=True, device="cuda", **SMALL)
    env.reset(seed=0)
    reference = make_env(**SMALL)
    reference.reset(seed=0)
    expected = reference.step(np.zeros((3, 8)))[0]["front_rgb"]
    obs, _, _, _, info = env.step(np.zeros((3, 8)))
    page = 1  # the reset filled page 0, this step page 1
    assert env._output.to_tensors._pending[page] is info["cuda_event"]  # the DMA reads the page...
    env._output.to_tensors.wait_copies(page)  # ...until this returns (the engine calls it before workers write it)
    assert page not in env._output.to_tensors._pending
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        side.wait_event(info["cuda_event"])
        total = obs["front_rgb"].sum()
    info["cuda_event"].synchronize()
    side.synchronize()
    assert int(total) == int(expected.sum())


@needs_cuda
def test_cuda_copies_chunks_and_unpinned_fallback(make_env, monkeypatch):
    monkeypatch.setattr("rlbench_vec.engine.tensors.register_pinned", lambda start, size: False)
    env = make_env(as_torch=True, device="cuda", copy_obs=True, chunk_obs="all", max_chunk=3, **SMALL)
    reference = make_env(chunk_obs="all", max_chunk=3, **SMALL)
    assert not env._output.to_tensors.pinned
    for vector in (env, reference):
        vector.reset(seed=2)
    actions = np.random.default_rng(2).uniform(-1, 1, (3, 3, 8))
    obs, reward, _, _, info = env.step_chunk(actions)  # copy_obs: staged copies, not the shared span
    ref = reference.step_chunk(actions)
    assert all(np.array_equal(obs[k].cpu().numpy(), ref[0][k]) for k in obs)
    assert reward.shape == (3, 3) and info["executed"].is_cuda
    chunk = info["chunk_observations"]["joint_positions"]
    assert chunk.is_cuda and np.array_equal(chunk.cpu().numpy(), ref[4]["chunk_observations"]["joint_positions"])


@needs_cuda
def test_cuda_partial_batches_and_close(make_env):
    env = make_env(as_torch=True, device="cuda", **SMALL)
    env.reset(seed=0)
    env.send(np.zeros((1, 8)), env_ids=[1])
    obs, *_ = env.recv()
    assert obs["front_rgb"].is_cuda and obs["front_rgb"].shape == (1, 16, 16, 3)
    converter = env._output.to_tensors
    env.close()
    assert not converter._unregister.alive, "close() should unpin the shared block before unlinking it"
