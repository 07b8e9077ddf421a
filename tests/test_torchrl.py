"""TorchRL over RLBenchVectorEnv, no adapter: TorchRL's GymWrapper takes the vector env as it is with
autoreset_mode="disabled" (the mode TorchRL prefers: its collectors reset finished envs through
reset(options={"reset_mask": ...})), and a collector gathers batches across episode ends."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import extra_reason

pytest.importorskip("torchrl", reason=extra_reason("ecosystem", ["torchrl"]))

import torch  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.envs import GymWrapper  # noqa: E402

LOW_DIM = ("joint_positions", "gripper_pose", "task_low_dim_state")
EPISODE = 5


class JointPolicy(torch.nn.Module):
    """Joint velocities in [-1, 1] from the joint positions; the gripper value is clipped to its bounds by the
    env (and flagged in info["action_clipped"])."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(7, 8)

    def forward(self, joint_positions: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.linear(joint_positions.float()))


def test_a_torchrl_collector_runs_over_the_vector_env(make_env):
    env = make_env(num_envs=2, task="reach_target", backend="mujoco", cameras=(), low_dim=LOW_DIM,
                   arm_mode="joint_velocity", max_episode_steps=EPISODE, autoreset_mode="disabled")
    wrapped = GymWrapper(env)
    assert wrapped.batch_size == torch.Size([2])
    assert set(LOW_DIM) <= set(wrapped.observation_spec.keys())
    torch.manual_seed(0)
    policy = TensorDictModule(JointPolicy(), in_keys=["joint_positions"], out_keys=["action"])
    collector = Collector(wrapped, policy, frames_per_batch=4 * EPISODE, total_frames=12 * EPISODE,
                          auto_register_policy_transforms=False)
    batches = [batch.clone() for batch in collector]
    collector.shutdown()

    assert [batch.shape for batch in batches] == [torch.Size([2, 2 * EPISODE])] * 3
    data = torch.cat(batches, dim=1)  # (env, time)
    done = data["next", "done"].squeeze(-1)
    ends = torch.zeros_like(done)
    ends[:, EPISODE - 1::EPISODE] = True
    assert torch.equal(done, ends | data["next", "terminated"].squeeze(-1))  # the step limit, or success
    assert torch.equal(data["next", "truncated"].squeeze(-1) | data["next", "terminated"].squeeze(-1), done)
    for env_id, t in torch.nonzero(done[:, :-1]).tolist():  # after every episode end TorchRL reset that env
        final = data["next", "task_low_dim_state"][env_id, t]
        first = data["task_low_dim_state"][env_id, t + 1]
        assert not torch.equal(final, first)  # a new target: a new episode
        assert not torch.equal(data["joint_positions"][env_id, t + 1], data["next", "joint_positions"][env_id, t])
    episodes = int(done.sum())
    assert np.sum(env.stats()["resets"]) >= 2 + episodes  # the first reset, then one per episode end


def test_torchrl_s_random_actions_act_in_a_joint_mode(make_env):
    """TorchRL's random policy samples the action spec TorchRL read from the env's finite bounds (the batched
    bounds are writable views: torch warns at read-only ones). In a joint mode every sample is valid; in the
    pose modes TorchRL samples the Box uniformly, not through its sample(): non-unit quaternions, refused."""
    env = make_env(num_envs=2, task="reach_target", backend="mujoco", cameras=(), low_dim=LOW_DIM,
                   arm_mode="joint_position", absolute_mode=False, autoreset_mode="disabled")
    assert all(space.low.flags.writeable for space in env.observation_space.values())
    wrapped = GymWrapper(env)
    torch.manual_seed(0)
    rollout = wrapped.rollout(5, break_when_any_done=False)
    assert rollout.shape == torch.Size([2, 5]) and rollout["action"].abs().max() <= 1.0
    assert not rollout["next", "done"].any()  # no sample was refused or ended its episode as invalid
