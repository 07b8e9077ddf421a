"""PPO on the GPU: backend="mjwarp", 1024 envs, a camera image and low-dim state into the policy (CleanRL style).

Every env is a world of one MuJoCo Warp simulator on the GPU. Observations arrive as CUDA tensors
(the worker's result pages, shared once; no host copy): the front camera's rgb (64x64 by default)
through a small CNN, and gripper_pose, joint_velocities and task_low_dim_state through an MLP, both
feeding one actor and one critic. action_timing="fixed": every action is one 0.05 s control step,
the arm heading for a target --max_move metres away per axis at most (arm_mode="ik", delta
positions, identity rotation), clipped into the workspace here, on the GPU. pick_and_lift adds a
gripper output (> 0 opens). The only host traffic per step is the actions going to the worker
(8 floats per env, the engine's shared memory) and the rewards and flags coming back.

The env's reward is sparse (1 on success, which ends the episode); training adds --shaping times the
decrease of a distance computed from the observations (reach_target: gripper to target; pick_and_lift:
gripper to block plus block to target). --dense_rewards 1 asks the env for this package's staged dense reward
instead (docs/tasks.md: reach, grasp, place; 1 on success), usually with --shaping 0. Success rates are always
the env's own: an episode ending with reward 1. next-step autoreset:
the step after an episode's end resets it (action ignored) and is left out of the loss; a truncated
episode's return is bootstrapped from the value of its final observation.

Training stops at --total_steps env steps or --budget_s seconds, whichever comes first. Evaluation:
the mean action on one fresh episode per env (seeds never seen in training), and a random policy.

    python examples/ppo_gpu.py                                   # reach_target, 1024 envs, cuda
    python examples/ppo_gpu.py --task pick_and_lift --out out/ppo_gpu_pick_and_lift
    python examples/ppo_gpu.py --backend mujoco --device cpu --num_envs 32    # no GPU: the same loop on CPUs

Writes <out>.json (curve, evaluation, throughput, command) and <out>_curve.png.
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
    import matplotlib  # noqa: F401  (the learning curve, drawn at the end: fail before training)
    import torch
    import torch.nn as nn
    from torch.distributions.normal import Normal
except ModuleNotFoundError as error:
    missing(error, extras="examples")

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.spec import WORKSPACE_HIGH, WORKSPACE_LOW

LOW_DIM = ("gripper_pose", "joint_velocities", "task_low_dim_state")
IDENTITY_QUAT = (0.0, 0.0, 0.0, 1.0)  # xyzw: keep the gripper's orientation


@dataclass
class Args:
    task: str = "reach_target"  # or pick_and_lift
    seed: int = 1
    num_envs: int = 1024
    backend: str = "mjwarp"  # or "mujoco" (same scene, timing and actions; one simulator per env, on CPUs)
    device: str = "cuda"  # "cpu": CPU tensors (mjwarp: warp's CPU device, slow: for trying the script out)
    camera: str = "front"
    image_size: int = 64
    total_steps: int = 4_000_000  # env steps
    budget_s: float = 240.0  # training wall-clock limit (the evaluation comes after it)
    num_steps: int = 32  # rollout length per env between updates
    learning_rate: float = 5e-4
    gamma: float = 0.95
    gae_lambda: float = 0.95
    update_epochs: int = 4
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    max_move: float = 0.05  # metres per axis per step
    shaping: float = 10.0  # 0: none (task_distance is not computed)
    dense_rewards: int = 0  # 1: the env's staged dense reward (backend_options["dense_rewards"])
    max_episode_steps: int = 50
    out: str = "out/ppo_gpu_reach"


def layer(module: nn.Module, std: float = np.sqrt(2)) -> nn.Module:
    nn.init.orthogonal_(module.weight, std)
    nn.init.zeros_(module.bias)
    return module


class Agent(nn.Module):
    """CNN over the image, MLP over the low-dim state (normalised by running statistics), one trunk
    for the actor (a diagonal Gaussian) and the critic."""

    def __init__(self, low_dim: int, act_size: int, image_size: int):
        super().__init__()
        self.cnn = nn.Sequential(
            layer(nn.Conv2d(3, 16, 8, stride=4)), nn.ReLU(), layer(nn.Conv2d(16, 32, 4, stride=2)), nn.ReLU(),
            nn.Flatten())
        with torch.no_grad():
            cnn_out = self.cnn(torch.zeros(1, 3, image_size, image_size)).shape[1]
        self.image = nn.Sequential(layer(nn.Linear(cnn_out, 128)), nn.ReLU())
        self.state = nn.Sequential(layer(nn.Linear(low_dim, 128)), nn.Tanh())
        self.actor = nn.Sequential(layer(nn.Linear(256, 256)), nn.Tanh(), layer(nn.Linear(256, act_size), 0.01))
        self.critic = nn.Sequential(layer(nn.Linear(256, 256)), nn.Tanh(), layer(nn.Linear(256, 1), 1.0))
        self.actor_logstd = nn.Parameter(torch.full((1, act_size), -0.5))
        self.register_buffer("mean", torch.zeros(low_dim))
        self.register_buffer("var", torch.ones(low_dim))
        self.register_buffer("count", torch.tensor(1e-4))

    def features(self, image: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        pixels = self.image(self.cnn(image.permute(0, 3, 1, 2).float() / 255.0))
        normalised = ((state - self.mean) / (self.var + 1e-8).sqrt()).clamp(-10, 10)
        return torch.cat([pixels, self.state(normalised)], dim=-1)

    def value(self, image: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        return self.critic(self.features(image, state)).squeeze(-1)

    def act(self, image: torch.Tensor, state: torch.Tensor, action: torch.Tensor | None = None):
        hidden = self.features(image, state)
        mean = self.actor(hidden)
        dist = Normal(mean, self.actor_logstd.expand_as(mean).exp())
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.critic(hidden).squeeze(-1)

    def observe(self, states: torch.Tensor) -> None:
        """Fold a rollout's low-dim states into the running mean and variance."""
        batch_mean, batch_var, n = states.mean(0), states.var(0, unbiased=False), states.shape[0]
        total = self.count + n
        delta = batch_mean - self.mean
        self.var.copy_((self.var * self.count + batch_var * n + delta**2 * self.count * n / total) / total)
        self.mean.add_(delta * n / total)
        self.count.copy_(total)


def low_dim(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([obs[key].float().reshape(len(obs[key]), -1) for key in LOW_DIM], dim=-1)


def task_distance(task: str, state: torch.Tensor) -> torch.Tensor:
    """The distance that shaping rewards decreasing, from low_dim() rows (gripper xyz first, the task's
    state from column 14: reach_target's target xyz; pick_and_lift's block xyz, then the target's xyz)."""
    tcp, task_state = state[:, 0:3], state[:, 14:]
    if task == "reach_target":
        return (tcp - task_state[:, 0:3]).norm(dim=-1)
    block, target = task_state[:, 0:3], task_state[:, 3:6]
    return (tcp - block).norm(dim=-1) + 2.0 * (block - target).norm(dim=-1)


class Actions:
    """Policy outputs in [-1, 1] (clipped) -> the env's ik actions: a delta position that keeps the
    target inside the workspace, identity rotation, gripper open unless the policy closes it."""

    def __init__(self, args: Args, device: torch.device):
        self.max_move, self.gripper = args.max_move, args.task != "reach_target"
        self.low = torch.tensor(WORKSPACE_LOW, dtype=torch.float32, device=device) + 0.01
        self.high = torch.tensor(WORKSPACE_HIGH, dtype=torch.float32, device=device) - 0.01
        self.template = torch.tensor([0, 0, 0, *IDENTITY_QUAT, 1.0], dtype=torch.float32, device=device)
        self.size = 4 if self.gripper else 3

    def __call__(self, policy_action: torch.Tensor, state: torch.Tensor) -> np.ndarray:
        tcp = state[:, 0:3]
        target = (tcp + policy_action[:, :3].clamp(-1, 1) * self.max_move).clamp(self.low, self.high)
        action = self.template.expand(len(state), -1).clone()
        action[:, :3] = target - tcp
        if self.gripper:
            action[:, 7] = (policy_action[:, 3] > 0).float()
        return action.cpu().numpy()  # to the worker: the engine's actions travel through shared memory


def make_env(args: Args, seed: int) -> RLBenchVectorEnv:
    return RLBenchVectorEnv(
        num_envs=args.num_envs, task=args.task, backend=args.backend,
        backend_options={**({"device": args.device} if args.backend == "mjwarp" else {}),
                         **({"dense_rewards": True} if args.dense_rewards else {})},
        cameras=(args.camera,), modalities=("rgb",), image_size=(args.image_size, args.image_size), low_dim=LOW_DIM,
        arm_mode="ik", absolute_mode=False, action_timing="fixed", max_episode_steps=args.max_episode_steps,
        seed=seed, as_torch=True, device=args.device)


def evaluate(env: RLBenchVectorEnv, policy, actions: Actions, seed: int, camera: str) -> float:
    """Success rate of the first (fresh) episode of every env."""
    obs, _ = env.reset(seed=seed)
    finished = torch.zeros(env.num_envs, dtype=torch.bool, device=actions.low.device)
    success = torch.zeros_like(finished)
    while not finished.all():
        state = low_dim(obs)
        with torch.no_grad():
            obs, reward, terminated, truncated, _ = env.step(actions(policy(obs[camera], state), state))
        done = (terminated | truncated) & ~finished
        success |= done & (reward >= 1)  # 1 on success, sparse or dense
        finished |= done
    return float(success.float().mean())


def main() -> None:  # noqa: C901 - one training loop, CleanRL style
    args = parse_args(Args, __doc__)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    started = time.time()
    env = make_env(args, args.seed)
    image_key = f"{args.camera}_rgb"
    state_size = sum(int(np.prod(env.single_observation_space[key].shape)) for key in LOW_DIM)
    actions = Actions(args, device)
    agent = Agent(state_size, actions.size, args.image_size).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    n, steps = args.num_envs, args.num_steps
    batch_size = n * steps
    minibatch_size = batch_size // args.num_minibatches
    images = torch.zeros((steps, n, args.image_size, args.image_size, 3), dtype=torch.uint8, device=device)
    states = torch.zeros((steps, n, state_size), device=device)
    taken = torch.zeros((steps, n, actions.size), device=device)
    logprobs, rewards, values = (torch.zeros((steps, n), device=device) for _ in range(3))
    dones, valid = (torch.zeros((steps, n), dtype=torch.bool, device=device) for _ in range(2))

    obs, _ = env.reset(seed=args.seed)
    next_image, next_state = obs[image_key].clone(), low_dim(obs)
    agent.observe(next_state)
    next_valid = torch.ones(n, dtype=torch.bool, device=device)  # False: the next-step autoreset of an ended episode
    setup_seconds, curve, env_steps, update = time.time() - started, [], 0, 0
    train_start = time.time()
    while env_steps < args.total_steps and time.time() - train_start < args.budget_s:
        update += 1
        episodes, successes = torch.zeros((), device=device), torch.zeros((), device=device)
        for t in range(steps):
            images[t], states[t], valid[t] = next_image, next_state, next_valid
            with torch.no_grad():
                action, logprobs[t], _, values[t] = agent.act(next_image, next_state)
            taken[t] = action
            obs, reward, terminated, truncated, _ = env.step(actions(action, next_state))
            landed = low_dim(obs)  # where the step led (an ended episode's final observation)
            done = terminated | truncated  # never on a next-step autoreset step: each episode ends once
            with torch.no_grad():  # a truncated return goes on past the time limit: bootstrap from where it ended
                bootstrap = torch.where(truncated & ~terminated, agent.value(obs[image_key], landed), 0.0)
            shaping = args.shaping * (task_distance(args.task, next_state) - task_distance(args.task, landed)) \
                if args.shaping else 0.0
            rewards[t] = reward.float() + shaping * next_valid + args.gamma * bootstrap
            dones[t] = done
            episodes += done.sum()
            successes += (done & (reward >= 1)).sum()
            next_image, next_state, next_valid = obs[image_key].clone(), landed, ~done
        env_steps += batch_size

        with torch.no_grad():  # GAE; the chain stops at every episode end (truncations bootstrapped above)
            next_value = agent.value(next_image, next_state)
            advantages = torch.zeros_like(rewards)
            last = torch.zeros(n, device=device)
            for t in reversed(range(steps)):
                following = next_value if t == steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * ~dones[t] - values[t]
                last = delta + args.gamma * args.gae_lambda * ~dones[t] * last
                advantages[t] = last
            returns = advantages + values

        keep = valid.reshape(-1).nonzero().squeeze(-1)  # next-step autoreset steps are left out of the loss
        b_images, b_states = images.reshape(-1, *images.shape[2:])[keep], states.reshape(-1, state_size)[keep]
        b_actions, b_logprobs = taken.reshape(-1, actions.size)[keep], logprobs.reshape(-1)[keep]
        b_returns, b_advantages = returns.reshape(-1)[keep], advantages.reshape(-1)[keep]
        b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)
        for _ in range(args.update_epochs):
            order = torch.randperm(len(keep), device=device)
            for start in range(0, len(keep), minibatch_size):
                idx = order[start:start + minibatch_size]
                _, new_logprob, entropy, new_value = agent.act(b_images[idx], b_states[idx], b_actions[idx])
                ratio = (new_logprob - b_logprobs[idx]).exp()
                adv = b_advantages[idx]
                pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
                v_loss = 0.5 * ((new_value - b_returns[idx]) ** 2).mean()
                loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * entropy.mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
        agent.observe(b_states)

        count = int(episodes)
        rate = float(successes) / count if count else 0.0
        seconds = time.time() - train_start
        curve.append({"env_steps": env_steps, "seconds": round(seconds, 1), "episodes": count,
                      "success_rate": round(rate, 4)})
        print(f"update {update} steps {env_steps} success {rate:.2f} ({count} episodes) {seconds:.0f}s "
              f"{env_steps / seconds:,.0f} env-steps/s", flush=True)
    train_seconds = time.time() - train_start

    mean_policy = lambda image, state: agent.actor(agent.features(image, state))
    random_policy = lambda image, state: torch.rand(len(state), actions.size, device=device) * 2 - 1
    eval_seed = args.seed + 10_000  # episodes never seen in training
    trained, random_rate = (evaluate(env, policy, actions, eval_seed, image_key)
                            for policy in (mean_policy, random_policy))
    env.close()
    print(f"success rate: trained {trained:.3f}, random {random_rate:.3f} ({n} fresh episodes each); "
          f"training {train_seconds:.0f}s, {env_steps / train_seconds:,.0f} env-steps/s")
    save(args, curve, trained, random_rate, train_seconds, setup_seconds, env_steps)


def save(args: Args, curve: list[dict], trained: float, random_rate: float, seconds: float, setup: float,
         env_steps: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU"
    result = {
        "command": "python " + shlex.join(sys.argv), "args": asdict(args), "device": device,
        "train_seconds": round(seconds, 1), "setup_seconds": round(setup, 1), "env_steps": env_steps,
        "env_steps_per_s": round(env_steps / seconds), "eval_episodes": args.num_envs,
        "eval_success_rate": {"trained_policy": trained, "random_policy": random_rate}, "curve": curve,
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([p["seconds"] for p in curve], [p["success_rate"] for p in curve], label="PPO (training episodes)")
    ax.axhline(trained, color="C0", linestyle=":", label=f"PPO, evaluation (mean action): {trained:.2f}")
    ax.axhline(random_rate, color="gray", linestyle="--", label=f"random policy: {random_rate:.2f}")
    ax.set(xlabel="training seconds", ylabel="success rate", ylim=(0, 1.02),
           title=f"{args.task}, {args.num_envs} envs on {device}: {env_steps / seconds:,.0f} env-steps/s")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out + "_curve.png", dpi=120)


if __name__ == "__main__":
    main()
