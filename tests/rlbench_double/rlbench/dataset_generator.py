"""Upstream's dataset generator (rlbench-generate-dataset), same arguments and on-disk layout:
<save_path>/<task>/variation<N>/variation_descriptions.pkl and .../episodes/episode<M>/ holding
low_dim_obs.pkl (the Demo without images) and <camera>_{rgb,depth,mask}/<step>.png. The double
collects in one process (--processes is accepted and ignored)."""

import argparse
import os
import pickle

import numpy as np
from PIL import Image

from rlbench.action_modes.action_mode import MoveArmThenGripper
from rlbench.action_modes.arm_action_modes import JointVelocity
from rlbench.action_modes.gripper_action_modes import Discrete
from rlbench.backend.const import (DEPTH_SCALE, EPISODE_FOLDER, EPISODES_FOLDER, IMAGE_FORMAT, LOW_DIM_PICKLE,
                                   VARIATION_DESCRIPTIONS, VARIATIONS_FOLDER)
from rlbench.backend.observation import CAMERAS
from rlbench.backend.utils import float_array_to_rgb_image
from rlbench.environment import Environment
from rlbench.observation_config import CameraConfig, ObservationConfig
from rlbench.utils import name_to_task_class


def save_demo(demo, example_path):
    """Images to PNG (depth as 24-bit RGB, masks RGB-coded), then the Demo pickled without them."""
    for camera in CAMERAS:
        for kind in ('rgb', 'depth', 'mask'):
            os.makedirs(os.path.join(example_path, f'{camera}_{kind}'), exist_ok=True)
    for i, obs in enumerate(demo):
        for camera in CAMERAS:
            images = {
                'rgb': Image.fromarray(getattr(obs, f'{camera}_rgb')),
                'depth': float_array_to_rgb_image(getattr(obs, f'{camera}_depth'), scale_factor=DEPTH_SCALE),
                'mask': Image.fromarray((getattr(obs, f'{camera}_mask') * 255).astype(np.uint8)),
            }
            for kind, image in images.items():
                image.save(os.path.join(example_path, f'{camera}_{kind}', IMAGE_FORMAT % i))
            for kind in ('rgb', 'depth', 'point_cloud', 'mask'):
                setattr(obs, f'{camera}_{kind}', None)
    with open(os.path.join(example_path, LOW_DIM_PICKLE), 'wb') as f:
        pickle.dump(demo, f)


def parse_args():
    parser = argparse.ArgumentParser(description="RLBench Dataset Generator")
    parser.add_argument('--save_path', type=str, default='/tmp/rlbench_data/')
    parser.add_argument('--tasks', nargs='*', default=[])
    parser.add_argument('--image_size', nargs=2, type=int, default=[128, 128])
    parser.add_argument('--renderer', type=str, choices=['opengl', 'opengl3'], default='opengl3')
    parser.add_argument('--processes', type=int, default=1)
    parser.add_argument('--episodes_per_task', type=int, default=10)
    parser.add_argument('--variations', type=int, default=-1)
    parser.add_argument('--arm_max_velocity', type=float, default=1.0)
    parser.add_argument('--arm_max_acceleration', type=float, default=4.0)
    return parser.parse_args()


def main():
    args = parse_args()
    camera = dict(image_size=list(args.image_size), depth_in_meters=False, masks_as_one_channel=False)
    obs_config = ObservationConfig(**{f'{c}_camera': CameraConfig(**camera) for c in CAMERAS},
                                   gripper_joint_positions=True, gripper_matrix=True, task_low_dim_state=True)
    env = Environment(MoveArmThenGripper(JointVelocity(), Discrete()), obs_config=obs_config, headless=True,
                      arm_max_velocity=args.arm_max_velocity, arm_max_acceleration=args.arm_max_acceleration)
    env.launch()
    for name in args.tasks:
        task_env = env.get_task(name_to_task_class(name))
        count = task_env.variation_count() if args.variations < 0 else min(args.variations, task_env.variation_count())
        for variation in range(count):
            task_env.set_variation(variation)
            descriptions, _ = task_env.reset()
            variation_path = os.path.join(args.save_path, task_env.get_name(), VARIATIONS_FOLDER % variation)
            os.makedirs(os.path.join(variation_path, EPISODES_FOLDER), exist_ok=True)
            with open(os.path.join(variation_path, VARIATION_DESCRIPTIONS), 'wb') as f:
                pickle.dump(descriptions, f)
            for episode in range(args.episodes_per_task):
                demo, = task_env.get_demos(amount=1, live_demos=True)
                save_demo(demo, os.path.join(variation_path, EPISODES_FOLDER, EPISODE_FOLDER % episode))
    env.shutdown()
    print('Data collection done!')


if __name__ == '__main__':
    main()
