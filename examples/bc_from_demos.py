"""Behaviour cloning on reach_target from oracle demos collected in parallel (MuJoCo backend, low-dim).

env.get_demos splits the demos over the workers, each running the scripted oracle in the env's own
action mode, here joint velocities: the policy must learn the reach in joint space (the oracle solves
IK with privileged knowledge and servoes the joints towards the solution). An MLP regresses the
oracle's actions from the observation, then runs closed loop in the same vector env.

    pip install -e ".[examples]"          # torch (yours, any build)
    python examples/bc_from_demos.py      # writes out/bc_reach.json
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
from cli import missing, parse_args  # examples/cli.py, beside this script

try:
    import torch
    import torch.nn as nn
except ModuleNotFoundError as error:
    missing(error, extras="examples")

from rlbench_vec import RLBenchVectorEnv

LOW_DIM = ("joint_positions", "gripper_pose", "task_low_dim_state")


@dataclass
class Args:
    seed: int = 1
    num_envs: int = 2
    demos: int = 400
    arm_mode: str = "joint_velocity"
    max_episode_steps: int = 50
    epochs: int = 300
    batch_size: int = 256
    learning_rate: float = 1e-3
    eval_episodes: int = 100
    out: str = "out/bc_reach.json"


def flatten(obs: dict[str, np.ndarray]) -> np.ndarray:
    """(..., features) float32 from the low-dim keys, for batches and for demos' time axes alike."""
    return np.concatenate([np.asarray(obs[key], np.float32).reshape(*obs[key].shape[:1], -1) for key in LOW_DIM], -1)


class Policy(nn.Module):
    """MLP on standardised observations, predicting standardised actions."""

    def __init__(self, obs: np.ndarray, actions: np.ndarray):
        super().__init__()
        stats = lambda x: (torch.tensor(x.mean(0)), torch.tensor(x.std(0) + 1e-6))
        self.obs_mean, self.obs_std = stats(obs)
        self.act_mean, self.act_std = stats(actions)
        self.net = nn.Sequential(nn.Linear(obs.shape[1], 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                 nn.Linear(256, actions.shape[1]))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Standardised prediction (the training target is standardised the same way)."""
        return self.net((obs - self.obs_mean) / self.obs_std)

    def act(self, obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            return (self(torch.from_numpy(obs)) * self.act_std + self.act_mean).numpy()


def evaluate(env: RLBenchVectorEnv, policy, episodes: int, seed: int) -> float:
    """Success rate over at least `episodes` finished episodes; policy: flat obs -> actions."""
    obs, _ = env.reset(seed=seed)
    successes = finished = 0
    while finished < episodes:
        obs, reward, terminated, truncated, _ = env.step(policy(flatten(obs)))
        done = terminated | truncated  # False on autoreset steps, so each episode counts once
        successes += int((reward[done] > 0).sum())
        finished += int(done.sum())
    return successes / finished


def main() -> None:
    args = parse_args(Args, __doc__)
    torch.manual_seed(args.seed)
    torch.set_num_threads(1)  # leave the cores to the simulator workers
    env = RLBenchVectorEnv(
        num_envs=args.num_envs, task="reach_target", backend="mujoco", cameras=(), low_dim=LOW_DIM,
        arm_mode=args.arm_mode, absolute_mode=False, max_episode_steps=args.max_episode_steps, seed=args.seed,
    )

    started = time.time()
    demos = env.get_demos(args.demos, seed=args.seed)  # every worker collects its share at once
    collect_seconds = time.time() - started
    good = [d for d in demos if d.success]
    if not good:
        raise SystemExit("no demo succeeded: raise --max_episode_steps so the oracle can finish")
    obs = np.concatenate([flatten(d.observations)[:-1] for d in good])  # the observation before each action
    actions = np.concatenate([d.actions for d in good])
    print(f"{len(good)}/{len(demos)} successful demos, {len(actions)} steps, collected in {collect_seconds:.1f}s")

    started = time.time()
    policy = Policy(obs, actions)
    optimizer = torch.optim.Adam(policy.parameters(), lr=args.learning_rate)
    x = torch.from_numpy(obs)
    y = (torch.from_numpy(actions) - policy.act_mean) / policy.act_std
    for _ in range(args.epochs):
        order = torch.randperm(len(x))
        for start in range(0, len(x), args.batch_size):
            idx = order[start:start + args.batch_size]
            loss = ((policy(x[idx]) - y[idx]) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    train_seconds = time.time() - started
    print(f"trained {args.epochs} epochs in {train_seconds:.1f}s, last minibatch loss {loss.item():.4f}")

    eval_seed = args.seed + 10_000  # episodes not in the demos
    low, high = actions.min(0), actions.max(0)  # the random baseline acts within the demos' range
    rng = np.random.default_rng(args.seed)
    bc_rate = evaluate(env, policy.act, args.eval_episodes, eval_seed)
    random_rate = evaluate(env, lambda o: rng.uniform(low, high, (len(o), len(low))), args.eval_episodes, eval_seed)
    env.close()
    print(f"success rate: behaviour cloning {bc_rate:.2f}, random {random_rate:.2f} "
          f"({args.eval_episodes} episodes each)")

    result = {
        "command": "python " + shlex.join(sys.argv), "args": asdict(args), "cpu_cores": os.cpu_count(),
        "demos": {"collected": len(demos), "successful": len(good), "steps": len(actions),
                  "collect_seconds": round(collect_seconds, 1)},
        "train_seconds": round(train_seconds, 1), "final_loss": round(loss.item(), 5),
        "eval_episodes": args.eval_episodes,
        "eval_success_rate": {"behaviour_cloning": bc_rate, "random_policy": random_rate},
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
