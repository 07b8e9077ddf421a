"""Save a montage of the embedded MuJoCo backend's five cameras: docs/camera_montage.png.

    python scripts/make_montage.py [--size 160] [--out docs/camera_montage.png]

Columns: the cameras in RLBench's order (left_shoulder, right_shoulder, overhead, wrist, front).
Rows: rgb of reach_target, pick_and_lift and open_drawer, each a few oracle actions into a seeded
episode; then open_drawer's depth (near = dark) and mask (one colour per object id).
"""

from __future__ import annotations

from pathlib import Path

import imageio.v3 as iio
import numpy as np

from rlbench_vec.backends.mujoco import BACKEND
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import CAMERAS, EnvConfig
from rlbench_vec.spec import observation_spec

TASK_ACTIONS = {"reach_target": 0, "pick_and_lift": 3, "open_drawer": 2}  # oracle actions before the shot


def observe(task: str, size: int, seed: int, actions: int) -> dict[str, np.ndarray]:
    config = EnvConfig(task=task, backend="mujoco", image_size=(size, size), modalities=("rgb", "depth", "mask"),
                       low_dim=()).validated()
    backend = BACKEND(config, 0)
    try:
        backend.reset(seed, None)
        for _, action in zip(range(actions), backend.sim.oracle_actions()):
            backend.step(action)
        out = {key: np.empty(spec.shape, spec.dtype) for key, spec in observation_spec(config).items()}
        backend.write_observation(out)
        return out
    finally:
        backend.close()


def colour_ids(mask: np.ndarray) -> np.ndarray:
    """A fixed pseudo-random colour per object id; background (0) black."""
    palette = np.random.default_rng(7).integers(40, 256, (int(mask.max()) + 1, 3)).astype(np.uint8)
    palette[0] = 0
    return palette[mask.astype(np.int64)]


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=160, help="pixels per camera image (square)")
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--out", default="docs/camera_montage.png")
    args = parser.parse_args()
    rows = []
    for task, actions in TASK_ACTIONS.items():
        obs = observe(task, args.size, args.seed, actions)
        rows.append([obs[f"{camera}_rgb"] for camera in CAMERAS])
    rows.append([np.repeat((255 * obs[f"{c}_depth"] ** 0.5).astype(np.uint8)[..., None], 3, axis=2) for c in CAMERAS])
    rows.append([colour_ids(obs[f"{camera}_mask"]) for camera in CAMERAS])
    gap = 4  # white lines between the images
    montage = np.concatenate(
        [
            np.pad(
                np.concatenate([np.pad(im, ((0, 0), (0, gap), (0, 0)), constant_values=255) for im in row], 1),
                ((0, gap), (0, 0), (0, 0)),
                constant_values=255,
            )
            for row in rows
        ],
        0,
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    iio.imwrite(args.out, montage)
    print(f"wrote {args.out} ({montage.shape[1]}x{montage.shape[0]})")


if __name__ == "__main__":
    run_main(main, "python scripts/make_montage.py")
