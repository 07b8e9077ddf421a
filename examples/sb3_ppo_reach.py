"""Stable-Baselines3 PPO on reach_target through rlbench_vec.sb3.SB3VecEnv (MuJoCo backend, low-dim).

The same task and action space as examples/ppo_reach.py, written the SB3 way: SB3VecEnv with flat
observations (gripper pose, task_low_dim_state), and two small VecEnvWrappers: ReachActions maps
the policy's 3 numbers in [-1, 1] to a delta end-effector move of at most --max_move metres per
axis (identity rotation, gripper open), DistanceShaping adds --shaping * (distance gained towards
the target) to the env's sparse success reward and reports info["is_success"], which SB3 logs as
rollout/success_rate. The distance at an episode's end comes from info["terminal_observation"]: the
observation SB3VecEnv returns with it is already the next episode's first.

    pip install -e ".[examples,ecosystem]"   # torch (yours, any build), matplotlib, stable-baselines3
    python examples/sb3_ppo_reach.py         # writes out/ppo_sb3_reach.json and out/ppo_sb3_reach_curve.png
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
from cli import missing, parse_args  # examples/cli.py, beside this script

try:
    import matplotlib  # noqa: F401  (the learning curve, drawn at the end: fail before training)
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.vec_env import VecEnv, VecEnvWrapper, VecMonitor
except ModuleNotFoundError as error:
    missing(error, extras="examples,ecosystem")

from rlbench_vec.sb3 import SB3VecEnv

LOW_DIM = ("gripper_pose", "task_low_dim_state")
IDENTITY_QUAT = (0.0, 0.0, 0.0, 1.0)  # xyzw: keep the gripper's orientation


@dataclass
class Args:
    seed: int = 1
    num_envs: int = 2
    total_steps: int = 40_000
    num_steps: int = 128  # rollout length per env between updates
    learning_rate: float = 1e-3
    gamma: float = 0.95
    gae_lambda: float = 0.95
    update_epochs: int = 8
    batch_size: int = 64
    max_move: float = 0.05  # metres per axis per step
    shaping: float = 10.0
    max_episode_steps: int = 30
    eval_episodes: int = 100
    out: str = "out/ppo_sb3_reach"


class ReachActions(VecEnvWrapper):
    """Policy actions in [-1, 1]^3 -> the env's 8-d ik action: delta xyz, identity rotation, gripper open."""

    def __init__(self, venv: VecEnv, max_move: float):
        super().__init__(venv, action_space=gym.spaces.Box(-1.0, 1.0, (3,), np.float32))
        self.max_move = max_move

    def step_async(self, actions: np.ndarray) -> None:
        env_actions = np.empty((self.num_envs, 8), np.float32)
        env_actions[:, :3] = np.clip(actions, -1.0, 1.0) * self.max_move
        env_actions[:, 3:7] = IDENTITY_QUAT
        env_actions[:, 7] = 1.0
        self.venv.step_async(env_actions)

    def reset(self) -> np.ndarray:
        return self.venv.reset()

    def step_wait(self):
        return self.venv.step_wait()


class DistanceShaping(VecEnvWrapper):
    """reward + shaping * (last distance - new distance) to the target; info["is_success"] at episode ends."""

    def __init__(self, venv: VecEnv, shaping: float):
        super().__init__(venv)
        layout = venv.unwrapped.flat_layout
        self.gripper = layout["gripper_pose"].start  # TCP xyz first
        self.target = layout["task_low_dim_state"].start  # target xyz first
        self.shaping = shaping
        self.last = np.zeros(self.num_envs)

    def distance(self, obs: np.ndarray) -> np.ndarray:
        return np.linalg.norm(obs[..., self.gripper:self.gripper + 3] - obs[..., self.target:self.target + 3], axis=-1)

    def reset(self) -> np.ndarray:
        obs = self.venv.reset()
        self.last = self.distance(obs)
        return obs

    def step_wait(self):
        obs, reward, dones, infos = self.venv.step_wait()
        landed = obs.copy()  # where each env's step led: the final observation for ended episodes
        for i in np.flatnonzero(dones):
            if "terminal_observation" in infos[i]:
                landed[i] = infos[i]["terminal_observation"]
            infos[i]["is_success"] = bool(reward[i] > 0)
        new = self.distance(landed)
        shaped = reward + self.shaping * (self.last - new)
        self.last = np.where(dones, self.distance(obs), new)
        return obs, shaped.astype(np.float32), dones, infos


class SuccessCurve(BaseCallback):
    """After every rollout: env steps, seconds, and the success rate of the episodes that ended in it."""

    def __init__(self):
        super().__init__()
        self.curve: list[dict] = []
        self.started = time.time()
        self.episodes = self.successes = 0

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"]):
            if done:
                self.episodes += 1
                self.successes += int(info["is_success"])
        return True

    def _on_rollout_end(self) -> None:
        rate = self.successes / self.episodes if self.episodes else 0.0
        self.curve.append({"env_steps": self.num_timesteps, "seconds": round(time.time() - self.started, 1),
                           "episodes": self.episodes, "success_rate": round(rate, 4)})
        print(f"steps {self.num_timesteps} success {rate:.2f} ({self.episodes} episodes) "
              f"{time.time() - self.started:.0f}s", flush=True)
        self.episodes = self.successes = 0


def evaluate(env: VecEnv, act, episodes: int, seed: int) -> float:
    """Success rate over at least `episodes` finished episodes; act: observations -> actions."""
    env.seed(seed)
    obs = env.reset()
    successes = finished = 0
    while finished < episodes:
        obs, _, dones, infos = env.step(act(obs))
        finished += int(dones.sum())
        successes += sum(int(info["is_success"]) for done, info in zip(dones, infos) if done)
    return successes / finished


def main() -> None:
    args = parse_args(Args, __doc__)
    torch.set_num_threads(1)  # leave the cores to the simulator workers
    base = SB3VecEnv(num_envs=args.num_envs, task="reach_target", backend="mujoco", cameras=(), low_dim=LOW_DIM,
                     observation="flat", arm_mode="ik", absolute_mode=False, arm_limit=args.max_move,
                     max_episode_steps=args.max_episode_steps, seed=args.seed)
    env = DistanceShaping(ReachActions(base, args.max_move), args.shaping)
    model = PPO("MlpPolicy", VecMonitor(env), learning_rate=args.learning_rate, n_steps=args.num_steps,
                batch_size=args.batch_size, n_epochs=args.update_epochs, gamma=args.gamma, gae_lambda=args.gae_lambda,
                ent_coef=0.0, seed=args.seed, device="cpu")
    curve = SuccessCurve()
    started = time.time()
    model.learn(total_timesteps=args.total_steps, callback=curve)
    train_seconds = time.time() - started

    eval_seed = args.seed + 10_000  # episodes never seen in training
    trained = evaluate(env, lambda obs: model.predict(obs, deterministic=True)[0], args.eval_episodes, eval_seed)
    rng = np.random.default_rng(args.seed)
    random_rate = evaluate(env, lambda obs: rng.uniform(-1, 1, (args.num_envs, 3)), args.eval_episodes, eval_seed)
    env.close()
    print(f"success rate: trained {trained:.2f}, random {random_rate:.2f} ({args.eval_episodes} episodes each); "
          f"training {train_seconds:.0f}s")
    save(args, curve.curve, trained, random_rate, train_seconds)


def save(args: Args, curve: list[dict], trained: float, random_rate: float, seconds: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = {
        "command": "python " + shlex.join(sys.argv), "args": asdict(args), "train_seconds": round(seconds, 1),
        "cpu_cores": os.cpu_count(), "eval_success_rate": {"trained_policy": trained, "random_policy": random_rate},
        "eval_episodes": args.eval_episodes, "curve": curve,
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([p["env_steps"] for p in curve], [p["success_rate"] for p in curve], label="SB3 PPO (training episodes)")
    ax.axhline(trained, color="C0", linestyle=":", label=f"SB3 PPO, evaluation (deterministic): {trained:.2f}")
    ax.axhline(random_rate, color="gray", linestyle="--", label=f"random policy: {random_rate:.2f}")
    ax.set(xlabel="env steps", ylabel="success rate", ylim=(0, 1.02),
           title=f"reach_target, SB3VecEnv: {seconds / 60:.1f} min on {os.cpu_count()} cores")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out + "_curve.png", dpi=120)


if __name__ == "__main__":
    main()
