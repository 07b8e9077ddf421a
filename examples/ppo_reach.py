"""PPO on reach_target: MuJoCo backend, low-dim observations, delta end-effector moves (CleanRL style).

The policy moves the gripper by at most --max_move metres per axis per step (arm_mode="ik",
absolute_mode=False: a delta position with an identity rotation, gripper open). Observations are
the gripper pose and task_low_dim_state (target xyz first, then the two distractors); cameras=()
so nothing renders. The env's reward is sparse (1 on success, which ends the episode); training adds
a shaping term, --shaping * (last distance - new distance) to the target, computed here from the
observations. Success rates are always the env's own.

--autoreset_mode picks gymnasium's autoreset mode of the vector env, and the loop handles each:
  next_step   the step that ends an episode returns its final observation; the env's next step
              resets it (action ignored): that step is left out of the loss.
  same_step   the step that ends an episode returns the next episode's first observation; the final
              one is in info["final_obs"].
  disabled    after a step that ends episodes, reset(options={"reset_mask": done}) resets those envs.
Either way, a truncated episode's return is bootstrapped from the value of its final observation.

    pip install -e ".[examples]"                          # torch (yours, any build) and matplotlib
    python examples/ppo_reach.py                          # one process, 2 env workers
    python examples/ppo_reach.py --autoreset_mode same_step --out out/ppo_reach_same_step
    torchrun --nproc_per_node 2 examples/ppo_reach.py --num_envs 1
        # each rank its own RLBenchVectorEnv (seeds offset by rank); gradients averaged with gloo

Writes <out>.json (curve, evaluation, command) and <out>_curve.png.
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
    import torch.distributed as dist
    import torch.nn as nn
    from torch.distributions.normal import Normal
except ModuleNotFoundError as error:
    missing(error, extras="examples")

from rlbench_vec import RLBenchVectorEnv

LOW_DIM = ("gripper_pose", "task_low_dim_state")
IDENTITY_QUAT = (0.0, 0.0, 0.0, 1.0)  # xyzw: keep the gripper's orientation


@dataclass
class Args:
    seed: int = 1
    num_envs: int = 2  # per rank (2 cores here: more workers only queue for them)
    total_steps: int = 40_000  # env steps, all ranks together
    num_steps: int = 128  # rollout length per env between updates
    learning_rate: float = 1e-3
    gamma: float = 0.95
    gae_lambda: float = 0.95
    update_epochs: int = 8
    num_minibatches: int = 4
    clip_coef: float = 0.2
    ent_coef: float = 0.0
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    max_move: float = 0.05  # metres per axis per step
    shaping: float = 10.0
    max_episode_steps: int = 30
    eval_episodes: int = 100  # per rank, for the trained and for the random policy
    autoreset_mode: str = "next_step"  # or "same_step", "disabled"
    out: str = "out/ppo_reach"


def layer(in_size: int, out_size: int, std: float = np.sqrt(2)) -> nn.Linear:
    linear = nn.Linear(in_size, out_size)
    nn.init.orthogonal_(linear.weight, std)
    nn.init.zeros_(linear.bias)
    return linear


class Agent(nn.Module):
    def __init__(self, obs_size: int, act_size: int):
        super().__init__()
        self.critic = nn.Sequential(layer(obs_size, 64), nn.Tanh(), layer(64, 64), nn.Tanh(), layer(64, 1, 1.0))
        self.actor_mean = nn.Sequential(layer(obs_size, 64), nn.Tanh(), layer(64, 64), nn.Tanh(),
                                        layer(64, act_size, 0.01))
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_size))

    def value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def act(self, x: torch.Tensor, action: torch.Tensor | None = None):
        mean = self.actor_mean(x)
        dist_ = Normal(mean, self.actor_logstd.expand_as(mean).exp())
        if action is None:
            action = dist_.sample()
        return action, dist_.log_prob(action).sum(-1), dist_.entropy().sum(-1), self.value(x)


def flatten(obs: dict[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([torch.as_tensor(obs[key]).float().reshape(len(obs[key]), -1) for key in LOW_DIM], dim=-1)


def distance(flat: torch.Tensor) -> torch.Tensor:
    """Gripper (TCP) to target, metres, from flattened observations (gripper_pose, then the target's xyz)."""
    return (flat[:, 0:3] - flat[:, 7:10]).norm(dim=-1)


@dataclass
class Transition:
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    landed: torch.Tensor  # where the step led: the final observation of an episode that ended
    next_obs: torch.Tensor  # what the policy sees next: the next episode's first observation where one ended
    next_valid: torch.Tensor  # False where the next step is a next-step autoreset (its action is ignored)


def advance(env: RLBenchVectorEnv, actions: np.ndarray) -> Transition:
    """One step in any autoreset mode."""
    obs, reward, terminated, truncated, info = env.step(actions)
    done = terminated | truncated  # never on a next-step autoreset step: each episode ends once
    landed = next_obs = flatten(obs)
    mode = env.vector_config.autoreset_mode
    if mode == "same_step" and done.any():
        landed = landed.clone()
        for i in torch.nonzero(done).flatten().tolist():
            if info["_final_obs"][i]:  # absent where a worker restart lost the episode
                landed[i] = flatten({key: value[None] for key, value in info["final_obs"][i].items()})[0]
    elif mode == "disabled" and done.any():
        obs, _ = env.reset(options={"reset_mask": done.numpy()})
        next_obs = flatten(obs)
    next_valid = ~done if mode == "next_step" else torch.ones_like(done)
    return Transition(reward.float(), terminated, truncated, landed, next_obs, next_valid)


def env_action(policy_action: torch.Tensor, max_move: float) -> np.ndarray:
    """Policy output in [-1, 1]^3 (clipped) -> the env's 8-d ik action: delta xyz, identity rotation, open."""
    n = policy_action.shape[0]
    action = np.empty((n, 8), np.float32)
    action[:, :3] = policy_action.clamp(-1, 1).numpy() * max_move
    action[:, 3:7] = IDENTITY_QUAT
    action[:, 7] = 1.0
    return action


def make_env(args: Args) -> RLBenchVectorEnv:
    return RLBenchVectorEnv(
        num_envs=args.num_envs, task="reach_target", backend="mujoco", cameras=(), low_dim=LOW_DIM,
        arm_mode="ik", absolute_mode=False, max_episode_steps=args.max_episode_steps, seed=args.seed,
        autoreset_mode=args.autoreset_mode, as_torch=True,  # CPU tensors over the shared memory: no copies
    )


def evaluate(env: RLBenchVectorEnv, policy, episodes: int, seed: int, max_move: float) -> float:
    """Success rate over at least `episodes` finished episodes (per rank); policy: obs -> [-1, 1]^3."""
    obs, _ = env.reset(seed=seed)
    next_obs = flatten(obs)
    successes, finished = 0, 0
    while finished < episodes:
        with torch.no_grad():
            step = advance(env, env_action(policy(next_obs), max_move))
        done = step.terminated | step.truncated
        successes += int((step.reward > 0)[done].sum())
        finished += int(done.sum())
        next_obs = step.next_obs
    return successes / finished


def masked_mean(values: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return (values * weight).sum() / weight.sum().clamp(min=1.0)


def all_reduce_mean(values: torch.Tensor, world: int) -> torch.Tensor:
    if world > 1:
        dist.all_reduce(values)
        values /= world
    return values


def main() -> None:
    args = parse_args(Args, __doc__)
    world, rank = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0))
    if world > 1:
        dist.init_process_group("gloo")
    torch.set_num_threads(1)  # leave the cores to the simulator workers
    torch.manual_seed(args.seed)  # identical initial weights on every rank
    started = time.time()

    env = make_env(args)  # env seeds are offset by rank inside RLBenchVectorEnv
    obs_size = sum(int(np.prod(env.single_observation_space[key].shape)) for key in LOW_DIM)
    agent = Agent(obs_size, 3)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    torch.manual_seed(args.seed + rank)  # different action noise per rank

    n, steps = args.num_envs, args.num_steps
    batch_size = n * steps
    minibatch_size = batch_size // args.num_minibatches
    updates = max(1, args.total_steps // (batch_size * world))
    obs_buf = torch.zeros(steps, n, obs_size)
    actions = torch.zeros(steps, n, 3)
    logprobs, rewards, values = (torch.zeros(steps, n) for _ in range(3))
    dones, valid = (torch.zeros(steps, n, dtype=torch.bool) for _ in range(2))

    obs, _ = env.reset(seed=args.seed)
    next_obs = flatten(obs)
    next_valid = torch.ones(n, dtype=torch.bool)  # False: this step is the next-step autoreset of an ended episode
    curve = []
    for update in range(1, updates + 1):
        episodes = successes = 0
        for t in range(steps):
            obs_buf[t], valid[t] = next_obs, next_valid
            with torch.no_grad():
                action, logprob, _, value = agent.act(next_obs)
            actions[t], logprobs[t], values[t] = action, logprob, value
            step = advance(env, env_action(action, args.max_move))
            done = step.terminated | step.truncated
            with torch.no_grad():  # a truncated return goes on past the time limit: bootstrap from where it ended
                bootstrap = torch.where(step.truncated & ~step.terminated, agent.value(step.landed), 0.0)
            shaping = args.shaping * (distance(next_obs) - distance(step.landed))
            rewards[t] = step.reward + shaping + args.gamma * bootstrap
            dones[t] = done
            episodes += int(done.sum())  # next-step autoreset steps are never done: each episode counts once
            successes += int((step.reward > 0)[done].sum())
            next_obs, next_valid = step.next_obs, step.next_valid

        # GAE: the chain stops at every episode end (truncations were bootstrapped above), and
        # next-step autoreset steps (valid False) are left out of the loss.
        with torch.no_grad():
            next_value = agent.value(next_obs)
            advantages = torch.zeros(steps, n)
            last = torch.zeros(n)
            for t in reversed(range(steps)):
                following = next_value if t == steps - 1 else values[t + 1]
                delta = rewards[t] + args.gamma * following * ~dones[t] - values[t]
                last = delta + args.gamma * args.gae_lambda * ~dones[t] * last
                advantages[t] = last
            returns = advantages + values

        # Every rank runs the same minibatches (all-reduce needs that): masked means skip the autoresets.
        b_obs, b_actions = obs_buf.reshape(-1, obs_size), actions.reshape(-1, 3)
        b_logprobs, b_returns, b_valid = logprobs.reshape(-1), returns.reshape(-1), valid.reshape(-1).float()
        b_advantages = advantages.reshape(-1)
        mean = masked_mean(b_advantages, b_valid)
        b_advantages = (b_advantages - mean) / (masked_mean((b_advantages - mean) ** 2, b_valid).sqrt() + 1e-8)
        for _ in range(args.update_epochs):
            order = torch.randperm(batch_size)
            for start in range(0, batch_size, minibatch_size):
                idx = order[start:start + minibatch_size]
                _, new_logprob, entropy, new_value = agent.act(b_obs[idx], b_actions[idx])
                ratio = (new_logprob - b_logprobs[idx]).exp()
                adv, weight = b_advantages[idx], b_valid[idx]
                clipped = ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)
                pg_loss = masked_mean(torch.max(-adv * ratio, -adv * clipped), weight)
                v_loss = 0.5 * masked_mean((new_value - b_returns[idx]) ** 2, weight)
                loss = pg_loss + args.vf_coef * v_loss - args.ent_coef * masked_mean(entropy, weight)
                optimizer.zero_grad()
                loss.backward()
                for p in agent.parameters():  # data-parallel: every rank applies the mean gradient
                    all_reduce_mean(p.grad, world)
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()

        counts = all_reduce_mean(torch.tensor([episodes, successes], dtype=torch.float64), world) * world
        env_steps = update * batch_size * world
        rate = float(counts[1] / counts[0]) if counts[0] else 0.0
        curve.append({"env_steps": env_steps, "seconds": round(time.time() - started, 1),
                      "episodes": int(counts[0]), "success_rate": round(rate, 4)})
        if rank == 0:
            print(f"update {update}/{updates} steps {env_steps} success {rate:.2f} "
                  f"({int(counts[0])} episodes) {time.time() - started:.0f}s", flush=True)
    train_seconds = time.time() - started

    mean_policy = lambda flat: agent.actor_mean(flat)
    random_policy = lambda flat: torch.rand(env.num_envs, 3) * 2 - 1
    eval_seed = args.seed + 10_000  # episodes never seen in training
    rates = torch.tensor([evaluate(env, policy, args.eval_episodes, eval_seed, args.max_move)
                          for policy in (mean_policy, random_policy)], dtype=torch.float64)
    trained, random_rate = all_reduce_mean(rates, world).tolist()
    env.close()
    if rank == 0:
        print(f"success rate: trained {trained:.2f}, random {random_rate:.2f} "
              f"({args.eval_episodes * world} episodes each); training {train_seconds:.0f}s")
        save(args, world, curve, trained, random_rate, train_seconds)
    if world > 1:
        dist.destroy_process_group()


def save(args: Args, world: int, curve: list[dict], trained: float, random_rate: float, seconds: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    launcher = f"torchrun --nproc_per_node {world} " if world > 1 else "python "
    result = {
        "command": launcher + shlex.join(sys.argv), "world_size": world, "args": asdict(args),
        "train_seconds": round(seconds, 1), "cpu_cores": os.cpu_count(),
        "eval_success_rate": {"trained_policy": trained, "random_policy": random_rate},
        "eval_episodes": args.eval_episodes * world, "curve": curve,
    }
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    with open(args.out + ".json", "w") as f:
        json.dump(result, f, indent=1)
    steps = [point["env_steps"] for point in curve]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, [point["success_rate"] for point in curve], label="PPO (training episodes)")
    ax.axhline(trained, color="C0", linestyle=":", label=f"PPO, evaluation (mean action): {trained:.2f}")
    ax.axhline(random_rate, color="gray", linestyle="--", label=f"random policy: {random_rate:.2f}")
    ax.set(xlabel="env steps", ylabel="success rate", ylim=(0, 1.02),
           title=f"reach_target, {args.autoreset_mode} autoreset: {seconds / 60:.1f} min on {os.cpu_count()} cores")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out + "_curve.png", dpi=120)


if __name__ == "__main__":
    main()
