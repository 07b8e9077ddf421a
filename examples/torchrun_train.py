"""A minimal training loop on RLBenchVectorEnv, one vector env per rank, under torchrun or alone.

    pip install -e ".[examples]"          # torch: yours, any build
    python examples/torchrun_train.py --backend synthetic
    torchrun --standalone --nproc_per_node=2 examples/torchrun_train.py --num_envs 4
    # two nodes (run on each; host0 must be reachable from both):
    torchrun --nnodes=2 --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=host0:29500 \\
        --rdzv_id=train1 examples/torchrun_train.py --num_envs 8 --cpu_affinity

Each rank starts its own workers. RLBenchVectorEnv keeps ranks apart by itself: env i of global rank
r is seeded seed + r * num_envs + i, shared-memory names carry the main process's pid, each worker's
Xvfb picks a free display, and cpu_affinity pins workers to this local rank's share of the cores.

The policy is a Gaussian over joint-position deltas, trained by a one-step policy gradient (reward
minus the batch mean); DistributedDataParallel averages its gradients over ranks with gloo. It shows
the plumbing of a distributed loop, not a way to solve the task.
"""

from __future__ import annotations

import time

import numpy as np
from cli import missing  # examples/cli.py, beside this script

from rlbench_vec import RLBenchVectorEnv
from rlbench_vec.cli import ArgumentParser
from rlbench_vec.distributed import RankInfo

try:
    import torch
    import torch.distributed as dist
    from torch import nn
except ModuleNotFoundError as error:
    missing(error, extras="examples")

INPUTS = ("joint_positions", "gripper_open", "task_low_dim_state")


def features(obs: dict[str, np.ndarray]) -> torch.Tensor:
    return torch.as_tensor(np.concatenate([obs[key].reshape(len(obs[key]), -1) for key in INPUTS], axis=1),
                           dtype=torch.float32)


class Policy(nn.Module):
    def __init__(self, inputs: int, joints: int = 7):
        super().__init__()
        self.mean = nn.Sequential(nn.Linear(inputs, 64), nn.Tanh(), nn.Linear(64, joints))
        self.log_std = nn.Parameter(torch.full((joints,), -3.0))

    def forward(self, x: torch.Tensor) -> torch.distributions.Normal:
        return torch.distributions.Normal(self.mean(x), self.log_std.exp())


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--task", default="reach_target")
    parser.add_argument("--num_envs", type=int, default=2, help="per rank")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--steps", type=int, default=16, help="env steps per iteration")
    parser.add_argument("--cpu_affinity", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    info = RankInfo.from_env()
    distributed = info.world_size > 1
    if distributed:
        dist.init_process_group(backend="gloo")  # CPU tensors; use nccl for GPU policies
    torch.manual_seed(args.seed + info.rank)  # exploration noise differs per rank; DDP syncs the weights

    env = RLBenchVectorEnv(
        num_envs=args.num_envs, task=args.task, backend=args.backend, cameras=("front", "wrist"),
        image_size=(64, 64), arm_mode="joint_position", absolute_mode=False, seed=args.seed,
        cpu_affinity=args.cpu_affinity,
    )
    try:
        obs, _ = env.reset()
        policy = Policy(features(obs).shape[1])
        model = nn.parallel.DistributedDataParallel(policy) if distributed else policy
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        gripper = np.ones((args.num_envs, 1), np.float32)
        for iteration in range(args.iterations):
            start, log_probs, rewards = time.perf_counter(), [], []
            for _ in range(args.steps):
                distribution = model(features(obs))
                delta = distribution.sample()
                log_probs.append(distribution.log_prob(delta).sum(-1))
                obs, reward, *_ = env.step(np.concatenate([delta.numpy(), gripper], axis=1))
                rewards.append(torch.as_tensor(reward, dtype=torch.float32))
            reward = torch.stack(rewards)
            loss = -((reward - reward.mean()) * torch.stack(log_probs)).mean()
            optimizer.zero_grad()
            loss.backward()  # DDP all-reduces the gradients here
            optimizer.step()

            totals = torch.tensor([args.num_envs * args.steps / (time.perf_counter() - start), reward.mean().item()])
            if distributed:
                dist.all_reduce(totals)  # env-steps/s and reward summed over ranks
            sps, mean_reward = totals[0].item(), totals[1].item() / info.world_size
            if info.rank == 0:
                print(f"iteration {iteration}: {sps:.0f} env-steps/s over {info.world_size} rank(s), "
                      f"mean reward {mean_reward:.3f}", flush=True)
    finally:
        env.close()
        if distributed:
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
