"""The five cameras as the mujoco backend's renderer and MuJoCo Warp's ray tracer see the same episode.

    python scripts/mjwarp_montage.py          (writes docs/mjwarp_montage.png; CPU is enough)

Both backends start pick_and_lift from the same seed and take the same oracle actions (ik, absolute
poses); the images are taken after them. Columns: the cameras. Row pairs (mujoco, then mjwarp):
rgb, depth (0 .. 2 m as black .. white), mask (one colour per body id).
"""

from __future__ import annotations

import itertools

import imageio.v3 as iio
import numpy as np

from rlbench_vec.backends.mujoco.backend import MujocoBackend
from rlbench_vec.cli import ArgumentParser, run_main
from rlbench_vec.config import EnvConfig
from rlbench_vec.spec import observation_spec


def to_rgb(key: str, image: np.ndarray) -> np.ndarray:
    if key.endswith("_rgb"):
        return image
    if key.endswith("_depth"):
        grey = (np.clip(image / 2.0, 0.0, 1.0) * 255).astype(np.uint8)
        return np.repeat(grey[..., None], 3, axis=-1)
    ids = image.astype(np.int64)
    return ((ids[..., None] * np.array([97, 57, 29])) % 200 + 40 * (ids[..., None] > 0)).astype(np.uint8)


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--actions", type=int, default=2, help="oracle actions taken before the pictures")
    parser.add_argument("--out", default="docs/mjwarp_montage.png")
    args = parser.parse_args()
    config = EnvConfig(task="pick_and_lift", backend="mujoco", arm_mode="ik", image_size=(128, 128),
                       modalities=("rgb", "depth", "mask"), depth_in_meters=True).validated()
    reference = MujocoBackend(config, 0)  # imports MuJoCo with its renderer first
    from rlbench_vec.backends.mjwarp.simulation import BatchedSimulation

    batched = BatchedSimulation(config, 1, "cpu")
    reference.reset(args.seed, None)
    batched.reset(seeds=[args.seed])
    for action in itertools.islice(reference.sim.oracle_actions(), args.actions):
        reference.step(action)
        batched.step(action[None])
    theirs = {key: np.zeros(s.shape, s.dtype) for key, s in observation_spec(config).items()}
    reference.write_observation(theirs)
    reference.close()
    mine = {key: value[0] for key, value in batched.observe_numpy().items()}
    rows = []
    for modality in ("rgb", "depth", "mask"):
        for observation in (theirs, mine):
            keys = [f"{camera}_{modality}" for camera in config.cameras]
            rows.append(np.concatenate([to_rgb(key, observation[key]) for key in keys], axis=1))
    iio.imwrite(args.out, np.concatenate(rows, axis=0))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    run_main(main, "python scripts/mjwarp_montage.py")
