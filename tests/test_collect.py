"""rlbench_vec.collect: the command and the function end to end on the real mujoco backend at tiny image sizes:
summary, read-back in both formats against the demo regenerated from its seed, determinism across envs,
a worker and a writer killed mid-collection, resume, retried and reported failures, argument errors; and the
rlbench backend through its test double."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import psutil
import pytest
from conftest import TORCHRUN, extra_reason, live_children, needs, own_segments
from PIL import Image

from rlbench_vec import CAMERAS, ConfigError, Demo, RLBenchVectorEnv, VectorConfig, list_tasks
from rlbench_vec.cli.collect import Tally, show_progress
from rlbench_vec.cli.runs import ProgressBar
from rlbench_vec.collect import SUMMARY_FILE, CollectConfig, collect, job_seed
from rlbench_vec.datasets import read_episode
from rlbench_vec.datasets.rlbench_format import DEPTH_SCALE, STAGING_FOLDER
from rlbench_vec.datasets.writers import Episode

TASK = "pick_and_lift"
ROOT = Path(__file__).resolve().parent.parent
DOUBLE = ROOT / "tests" / "rlbench_double"
CONFIG = CollectConfig(tasks=(TASK,), episodes_per_task=3, variations=2, backend="mujoco", num_envs=2,
                       image_size=(16, 16), progress=False)
LOW_DIM = ("joint_velocities", "joint_positions", "joint_forces", "gripper_open", "gripper_pose",
           "gripper_joint_positions", "task_low_dim_state")


def regenerate(config: CollectConfig, *episodes: Episode) -> list[Demo]:
    """The demos the collector stores for `episodes` of one task (first attempts), collected from their seeds and
    variations."""
    env_config = config.validated().env_config(episodes[0].task)
    with RLBenchVectorEnv.from_config(env_config, VectorConfig(num_envs=1)) as env:
        return [env.call("get_demos", 1, job_seed(config.seed, episode, 0), variation=episode.variation,
                         ends_episode=True)[0][0] for episode in episodes]


def leftover_processes() -> list[psutil.Process]:
    """Our descendants, but Python's resource tracker (it lives as long as this process, engine or not)."""
    return [p for p in live_children() if "resource_tracker" not in " ".join(p.cmdline())]


def files(root: Path) -> dict[str, bytes]:
    """A dataset's files and what they hold: a PNG its decoded pixels, any other file its bytes. The same
    pixels may be deflated into other bytes now and then (ISA-L, see README's Tests and CI section)."""
    return {str(path.relative_to(root)): content(path) for path in sorted(root.rglob("*")) if path.is_file()
            and path.name != SUMMARY_FILE}


def content(path: Path) -> bytes:
    if path.suffix != ".png":
        return path.read_bytes()
    with Image.open(path) as image:
        return f"{image.mode} {image.size}".encode() + image.tobytes()


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict[int, tuple[Path, dict]]:
    """By writer processes (1 or 0): the same dataset written by a writer process, and by the workers themselves."""
    made = {}
    for writers in (1, 0):
        out = tmp_path_factory.mktemp("collected")
        summary = collect(replace(CONFIG, out=str(out), writers=writers))
        assert summary["writer"]["processes"] == writers
        assert not own_segments() and not leftover_processes(), "collect() left processes or shared memory behind"
        made[writers] = out, summary
    return made


@pytest.fixture(params=[1, 0], ids=["writer process", "workers write"])
def collected(request, datasets) -> tuple[Path, dict]:
    return datasets[request.param]


def test_a_writer_process_and_the_workers_write_the_same_files(datasets):
    assert files(datasets[1][0]) == files(datasets[0][0])


def test_function_collects_every_episode_and_summarises(collected):
    out, summary = collected
    assert json.loads((out / SUMMARY_FILE).read_text()) == summary
    assert summary["finished"] and summary["episodes"] == {"planned": 6, "written": 6, "skipped": 0, "failed": 0}
    assert summary["tasks"][TASK]["variations"] == 2 and summary["tasks"][TASK]["written"] == 6
    assert summary["failures"] == {"demo_failures": 0, "worker_errors": 0, "jobs_failed": 0}
    assert summary["seconds"] > 0 and summary["demos_per_s"] == pytest.approx(6 / summary["seconds"], rel=1e-2)
    assert summary["writer"]["demos_written"] == 6 and summary["writer"]["queue_depth_max"] <= 2
    assert summary["command"].startswith("python -m rlbench_vec.collect --tasks pick_and_lift")
    for variation in (0, 1):
        episodes = out / TASK / f"variation{variation}" / "episodes"
        assert sorted(os.listdir(episodes)) == ["episode0", "episode1", "episode2"]
    assert not (out / STAGING_FOLDER).exists()


def test_rlbench_format_reads_back_within_rlbench_precision(datasets):
    out, _ = datasets[1]  # writers=0 stores the same files (checked above)
    episode = Episode(TASK, 1, 2)
    [original] = regenerate(CONFIG, episode)
    back = read_episode(out / TASK / "variation1" / "episodes" / "episode2")
    steps = len(original.actions) + 1
    assert len(back.actions) == steps - 1 and back.actions.dtype == np.float32
    np.testing.assert_array_equal(back.actions, original.actions)
    assert back.variation_index == 1 and back.descriptions == original.descriptions
    assert "pick up the maroon block" in back.descriptions[0]  # variation 1 is the second colour
    for camera in CAMERAS:
        rgb, depth, mask = (back.observations[f"{camera}_{m}"] for m in ("rgb", "depth", "mask"))
        assert rgb.shape == (steps, 16, 16, 3) and rgb.dtype == np.uint8
        assert depth.shape == mask.shape == (steps, 16, 16) and depth.dtype == mask.dtype == np.float32
        np.testing.assert_array_equal(rgb, original.observations[f"{camera}_rgb"])
        np.testing.assert_array_equal(mask, original.observations[f"{camera}_mask"])
        reference = original.observations[f"{camera}_depth"]
        assert np.all(np.abs(depth - reference) <= 0.5 / DEPTH_SCALE + np.spacing(reference)), camera
    for name in LOW_DIM:
        np.testing.assert_array_equal(back.observations[name], original.observations[name])


def test_one_env_collects_every_variation_each_episode_in_its_folder(datasets):
    """Two envs share both variations' jobs (each passes its variation to get_demos): every episode is stored under
    its variation, with that variation's number and descriptions, and is the demo regenerated with that variation."""
    out, _ = datasets[1]  # writers=0 stores the same files (checked above)
    episodes = [Episode(TASK, v, e) for v in (0, 1) for e in range(3)]
    for episode, original in zip(episodes, regenerate(CONFIG, *episodes)):
        folder = out / TASK / f"variation{episode.variation}" / "episodes" / f"episode{episode.episode}"
        assert pickle.loads((folder / "variation_number.pkl").read_bytes()) == episode.variation
        back = read_episode(folder)
        assert back.variation_index == original.variation_index == episode.variation
        assert back.descriptions == original.descriptions
        np.testing.assert_array_equal(back.actions, original.actions)
        np.testing.assert_array_equal(back.observations["front_rgb"], original.observations["front_rgb"])


def mujoco_workers(pid: int) -> list[psutil.Process]:
    """Descendants of `pid` that loaded MuJoCo: the env workers (the writers never import it)."""
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if any("mujoco" in region.path for region in child.memory_maps()):
                found.append(child)
        except psutil.Error:
            pass
    return found


def test_cli_survives_a_killed_worker_and_stores_the_same_demos(datasets, tmp_path):
    """A worker SIGKILLed mid-collection costs its demo only: it is collected again with the same seed, so the
    dataset (collected here by one env, through the command) is the function's with two envs: the same files,
    the same pixels in every image and the same bytes in every other file.
    Its progress, with stderr not a terminal, comes as whole lines."""
    out, _ = datasets[1]
    command = [sys.executable, "-m", "rlbench_vec.collect", "--tasks", TASK, "--episodes_per_task", "3",
               "--variations", "2", "--backend", "mujoco", "--num_envs", "1", "--image_size", "16", "16",
               "--out", str(tmp_path)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and process.poll() is None and time.monotonic() < deadline:
        if (tmp_path / TASK / "variation0" / "episodes").is_dir():  # one demo written: the next is under way
            for worker in mujoco_workers(process.pid):
                worker.send_signal(signal.SIGKILL)
                killed = worker.pid
        time.sleep(0.01)
    stdout, stderr = process.communicate(timeout=120)
    assert killed is not None, "the run ended before a worker could be killed"
    assert process.returncode == 0, stderr
    assert "6 episodes written" in stdout
    progress = [line for line in stderr.splitlines() if " episodes, " in line]
    assert progress[-1].startswith("done: 6/6 episodes, ") and progress[-1].endswith("writer queue 0/2"), stderr
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["failures"]["worker_errors"] == 1 and summary["episodes"]["written"] == 6
    assert summary["command"] == "python -m rlbench_vec.collect " + " ".join(command[3:])
    assert files(tmp_path) == files(out)
    rerun = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0 and "0 episodes written, 6 already there, 0 failed" in rerun.stdout
    lines = rerun.stderr.splitlines()
    assert lines[0] == f"resuming {tmp_path}: 6 of 6 episodes are already there, 0 to collect", rerun.stderr
    assert lines[-1].startswith("done: 6/6 episodes, "), rerun.stderr


def test_rerun_resumes_and_sweeps_stale_staging(datasets, tmp_path):
    out, _ = datasets[1]
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / TASK / "variation0" / "episodes" / "episode1")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = copy / STAGING_FOLDER / f"{socket.gethostname()}-{int(dead.stdout)}-{'0' * 32}"
    (stale / "front_rgb").mkdir(parents=True)  # what a writer killed mid-episode leaves
    summary = collect(replace(CONFIG, out=str(copy)))
    assert summary["episodes"] == {"planned": 1, "written": 1, "skipped": 5, "failed": 0}
    assert summary["stale_staging_removed"] == 1 and not (copy / STAGING_FOLDER).exists()
    assert files(copy) == files(out)
    with pytest.raises(ConfigError, match="other arguments"):
        collect(replace(CONFIG, out=str(copy), image_size=(24, 24)))


@needs("torch", "torch")
def test_two_ranks_under_torchrun_store_the_files_of_one_process(datasets, tmp_path):
    """torchrun, two ranks on the CPU: the episodes dealt between the ranks, each demo from its own seed into its
    own folder, so the dataset is one process's, file for file; rank 0 alone reports, the counts of both ranks;
    one process resumes the folder."""
    out, _ = datasets[0]
    done = subprocess.run([*TORCHRUN, "-m", "rlbench_vec.collect", "--tasks", TASK, "--episodes_per_task", "3",
                           "--variations", "2", "--backend", "mujoco", "--num_envs", "1", "--image_size", "16", "16",
                           "--writers", "0", "--progress", "0", "--out", str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("episodes written") == 1 and "6 episodes written, 0 already there" in done.stdout
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["world_size"] == 2 and summary["finished"] and summary["tasks"][TASK]["written"] == 6
    assert files(tmp_path) == files(out)
    shutil.rmtree(tmp_path / TASK / "variation1" / "episodes" / "episode2")
    resumed = collect(replace(CONFIG, out=str(tmp_path), writers=0))
    assert resumed["episodes"] == {"planned": 1, "written": 1, "skipped": 5, "failed": 0} and resumed["world_size"] == 1
    assert files(tmp_path) == files(out)


def test_failed_demos_are_retried_then_reported(tmp_path):
    """pick_and_lift's oracle needs more than 2 steps: every attempt fails, each job is tried max_attempts times."""
    summary = collect(replace(CONFIG, out=str(tmp_path), episodes_per_task=2, variations=1, max_episode_steps=2,
                              max_attempts=2))
    assert summary["failures"] == {"demo_failures": 4, "worker_errors": 0, "jobs_failed": 2}
    assert summary["episodes"] == {"planned": 2, "written": 0, "skipped": 0, "failed": 2}
    failed = sorted((f["variation"], f["episode"], f["attempts"]) for f in summary["tasks"][TASK]["failed"])
    assert failed == [(0, 0, 2), (0, 1, 2)]
    assert not (tmp_path / TASK / "variation0" / "episodes").exists()


def test_a_hung_worker_is_restarted_and_its_job_reported(tmp_path):
    """No demo finishes within demo_timeout_s: the engine kills and restarts the worker, and the job counts as
    lost to its worker (with max_attempts=1 it is then given up and reported)."""
    summary = collect(replace(CONFIG, out=str(tmp_path), episodes_per_task=1, variations=2, demo_timeout_s=0.01,
                              max_attempts=1))
    assert summary["failures"] == {"demo_failures": 0, "worker_errors": 2, "jobs_failed": 2}
    assert all("restarted" in job["error"] for job in summary["tasks"][TASK]["failed"])


@pytest.mark.parametrize("change, message", [
    ({"cameras": ("front",)}, "all five cameras"),
    ({"modalities": ("rgb",)}, "all five cameras"),
    ({"backend_options": {"variation": 1}}, "set per job"),
    ({"variations": 99}, "20 variations"),
    ({"format": "hdf5"}, "unknown format"),
    ({"backend": "synthetic"}, "collects no demos"),
    ({"tasks": ()}, "at least one task"),
    ({"max_attempts": 0}, "max_attempts"),
])
def test_bad_arguments_raise_before_anything_starts(change, message, tmp_path):
    with pytest.raises(ConfigError, match=message):
        collect(replace(CONFIG, out=str(tmp_path / "never"), **change))
    assert not leftover_processes()


def test_all_tasks_are_every_task_of_the_backend():
    assert CollectConfig(tasks=("all",), backend="mujoco").validated().tasks == tuple(list_tasks("mujoco"))
    with pytest.raises(ConfigError, match="collects no demos"):
        CollectConfig(tasks="all", backend="synthetic").validated()


def test_lerobot_format_reads_back(tmp_path):
    pytest.importorskip("lerobot.datasets.lerobot_dataset", reason=extra_reason("lerobot", ["lerobot"]))
    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    config = replace(CONFIG, out=str(tmp_path), format="lerobot", cameras=("front", "wrist"), image_size=(32, 32),
                     variations=1, episodes_per_task=2)
    summary = collect(config)
    assert summary["episodes"]["written"] == 2
    originals = regenerate(config, *(Episode(TASK, 0, e) for e in range(2)))
    dataset = LeRobotDataset(f"rlbench_vec/{TASK}", root=tmp_path / TASK)
    assert dataset.num_episodes == 2 and len(dataset) == sum(len(demo.actions) for demo in originals)
    by_episode = {}
    for index in range(len(dataset)):
        item = dataset[index]
        by_episode.setdefault(int(item["rlbench_episode"][1]), []).append(item)
    for number, demo in enumerate(originals):
        items = by_episode[number]
        assert len(items) == len(demo.actions)
        for t in (0, len(items) - 1):
            item = items[t]
            assert item["task"] == demo.descriptions[0] and item["rlbench_episode"].tolist() == [0, number]
            np.testing.assert_array_equal(item["action"].numpy(), demo.actions[t])
            for camera in ("front", "wrist"):
                image = item[f"observation.images.{camera}"]
                assert tuple(image.shape) == (3, 32, 32) and str(image.dtype) == "torch.float32"
                decoded = image.numpy().transpose(1, 2, 0) * 255
                assert np.abs(decoded - demo.observations[f"{camera}_rgb"][t]).mean() < 12  # lossy video


@pytest.mark.parametrize("cores, num_envs, writers", [(16, 1, 1), (16, 4, 2), (16, 12, 4), (16, 16, 0), (2, 1, 1),
                                                      (2, 2, 0), (2, 8, 0)])
def test_writers_take_the_cores_the_envs_leave(monkeypatch, cores, num_envs, writers):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert CollectConfig(tasks=(TASK,), num_envs=num_envs, backend="mujoco").validated().writers == writers
    assert CollectConfig(tasks=(TASK,), num_envs=num_envs, backend="mujoco", writers=3).validated().writers == 3


def test_a_dead_writer_stops_the_run_and_a_rerun_completes(tmp_path):
    """A writer killed mid-run loses what it was writing: the run stops with a DatasetError (exit code 2) and
    its summary; the rerun sweeps the writer's staging folder and collects what is missing."""
    command = [sys.executable, "-m", "rlbench_vec.collect", "--tasks", TASK, "--episodes_per_task", "4",
               "--backend", "mujoco", "--num_envs", "2", "--writers", "1", "--image_size", "16", "16", "--progress",
               "0", "--out", str(tmp_path)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and process.poll() is None and time.monotonic() < deadline:
        if (tmp_path / TASK / "variation0" / "episodes").is_dir():
            workers = {worker.pid for worker in mujoco_workers(process.pid)}
            writers = [child for child in psutil.Process(process.pid).children()
                       if child.pid not in workers and "resource_tracker" not in " ".join(child.cmdline())]
            if workers and writers:
                writers[0].send_signal(signal.SIGKILL)
                killed = writers[0].pid
        time.sleep(0.01)
    _, stderr = process.communicate(timeout=120)
    assert killed is not None, "the run ended before its writer could be killed"
    assert process.returncode == 1, stderr  # a failure of the run, not of its arguments (those are 2)
    assert stderr.strip().splitlines()[-1].startswith("python -m rlbench_vec.collect: error: writer process 0 died")
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert not summary["finished"] and summary["episodes"]["written"] < 4
    rerun = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    summary = json.loads((tmp_path / SUMMARY_FILE).read_text())
    assert summary["episodes"]["written"] + summary["episodes"]["skipped"] == 4
    assert sorted(os.listdir(tmp_path / TASK / "variation0" / "episodes")) == [f"episode{i}" for i in range(4)]
    assert not (tmp_path / STAGING_FOLDER).exists()


@pytest.mark.skipif(shutil.which("Xvfb") is None, reason="the RLBench double needs Xvfb (apt-get install xvfb)")
def test_rlbench_backend_collects_every_variation_through_the_double(monkeypatch, tmp_path):
    """The rlbench backend (its test double: CoppeliaSim cannot run here): one env per task, started once, collects
    every variation, each job passing its own to get_demos; --variations all asks the started env for the count."""
    log = tmp_path / "double.jsonl"
    monkeypatch.syspath_prepend(str(DOUBLE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(DOUBLE), str(ROOT)]))
    monkeypatch.setenv("RLBENCH_DOUBLE_LOG", str(log))

    def events(kind: str) -> list[dict]:
        return [call for call in map(json.loads, log.read_text().splitlines()) if call["event"] == kind]

    config = replace(CONFIG, out=str(tmp_path / "out"), backend="rlbench", tasks=("reach_target",),
                     episodes_per_task=2)
    summary = collect(config)
    assert summary["episodes"]["written"] == 4 and summary["config"]["backend"] == "rlbench"
    assert sorted(call["variation"] for call in events("get_demos")) == [0, 0, 1, 1]
    assert len(events("get_task")) == 2, "the task's two envs should start once, not once per variation"
    for variation in (0, 1):
        for episode in (0, 1):
            stored = read_episode(tmp_path / "out" / "reach_target" / f"variation{variation}" / "episodes"
                                  / f"episode{episode}")
            assert stored.variation_index == variation and stored.observations["front_rgb"].shape[1:] == (16, 16, 3)

    every = replace(config, out=str(tmp_path / "all"), tasks=("open_drawer",), episodes_per_task=1, variations="all")
    summary = collect(every)
    assert summary["tasks"]["open_drawer"]["variations"] == 3 and summary["episodes"]["written"] == 3
    for variation in range(3):
        folder = tmp_path / "all" / "open_drawer" / f"variation{variation}" / "episodes" / "episode0"
        assert pickle.loads((folder / "variation_number.pkl").read_bytes()) == variation
        assert read_episode(folder).variation_index == variation
    with pytest.raises(ConfigError, match="open_drawer has 3 variations; --variations 4 asks for more"):
        collect(replace(every, out=str(tmp_path / "more"), variations=4))
    assert "rlbench" not in sys.modules and "pyrep" not in sys.modules, "the main process imported the simulator"


@pytest.mark.parametrize("writers", ["0", "1"])
def test_a_full_disk_stops_at_the_first_failure_with_one_line(small_disk, writers):
    """Writing in the workers (--writers 0) or in a writer process: the first 'No space left on device' ends
    the run (no job retried for it), with one line saying where and how to resume, exit status 1; every
    episode on disk is whole."""
    out = small_disk / "dataset"
    command = [sys.executable, "-m", "rlbench_vec.collect", "--tasks", "reach_target", "--episodes_per_task", "40",
               "--backend", "mujoco", "--num_envs", "1", "--writers", writers, "--image_size", "32", "32",
               "--out", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"python -m rlbench_vec.collect: error: the disk holding {out} is full ("), done.stderr
    assert "No space left on device" in last and last.endswith("run the same command again to resume.")
    assert "Traceback" not in done.stderr
    episodes = sorted((out / "reach_target" / "variation0" / "episodes").iterdir())
    assert 0 < len(episodes) < 40
    for episode in episodes:
        demo = read_episode(episode)  # every file of the episode is there and reads back
        assert len(demo.observations["front_rgb"]) == len(demo.observations["joint_positions"]) > 0
    assert not leftover_processes()


def test_progress_of_a_run_of_several_tasks_says_its_counts_are_of_all(capsys):
    """A line names the task under way; its counts are the whole run's, and say so."""
    tally = Tally(planned={"reach_target": 2, "open_drawer": 3}, tasks=2)
    tally.written["reach_target"] = 1
    show_progress(ProgressBar(True, "demos"), "reach_target (task 1/2)", tally)
    line = capsys.readouterr().err
    assert line.startswith("reach_target (task 1/2): 1/5 episodes of all 2 tasks, "), line
