import importlib
import pickle
import re
from os import listdir
from os.path import exists, join

import numpy as np
from PIL import Image
from pyrep.objects import VisionSensor

from rlbench.backend.const import (
    DEPTH_SCALE,
    EPISODES_FOLDER,
    IMAGE_FORMAT,
    LOW_DIM_PICKLE,
    VARIATIONS_ALL_FOLDER,
    VARIATIONS_FOLDER,
)
from rlbench.backend.observation import CAMERAS
from rlbench.backend.utils import image_to_float_array, rgb_handles_to_mask


class InvalidTaskName(Exception):
    pass


def name_to_task_class(task_file: str):
    name = task_file.replace('.py', '')
    class_name = ''.join([w[0].upper() + w[1:] for w in name.split('_')])
    try:
        mod = importlib.import_module("rlbench.tasks.%s" % name)
        mod = importlib.reload(mod)
    except ModuleNotFoundError as e:
        raise InvalidTaskName(
            "The task file '%s' does not exist or cannot be compiled." % name) from e
    try:
        task_class = getattr(mod, class_name)
    except AttributeError as e:
        raise InvalidTaskName(
            "Cannot find the class name '%s' in the file '%s'." % (class_name, name)) from e
    return task_class


def _natural_key(name: str):
    """natsort's order for names such as episode10."""
    return [int(part) if part.isdigit() else part for part in re.split(r'(\d+)', name)]


def _resize_if_needed(image, size):
    if image.size[0] != size[0] or image.size[1] != size[1]:
        image = image.resize(size)
    return image


def get_stored_demos(amount: int, image_paths: bool, dataset_root: str, variation_number: int, task_name: str,
                     obs_config, random_selection: bool = True, from_episode_number: int = 0):
    """Upstream's reader of dataset_root/<task>/variation<N>/episodes/episode<M>/: the pickled Demo
    (low-dim data and misc) plus one PNG per step and camera, loaded as obs_config asks."""
    task_root = join(dataset_root, task_name)
    if not exists(task_root):
        raise RuntimeError("Can't find the demos for %s at: %s" % (task_name, task_root))
    if variation_number == -1:  # all variations (YARR's set_variation(-1))
        examples_path = join(task_root, VARIATIONS_ALL_FOLDER, EPISODES_FOLDER)
    else:
        examples_path = join(task_root, VARIATIONS_FOLDER % variation_number, EPISODES_FOLDER)
    examples = listdir(examples_path)
    if amount == -1:
        amount = len(examples)
    if amount > len(examples):
        raise RuntimeError('You asked for %d examples, but only %d were available.' % (amount, len(examples)))
    if random_selection:
        selected = np.random.choice(examples, amount, replace=False)
    else:
        selected = sorted(examples, key=_natural_key)[from_episode_number:from_episode_number + amount]

    demos = []
    for example in selected:
        example_path = join(examples_path, example)
        with open(join(example_path, LOW_DIM_PICKLE), 'rb') as f:
            obs = pickle.load(f)
        num_steps = len(obs)
        if not all(num_steps == len(listdir(join(example_path, f'{c}_{kind}')))
                   for c in CAMERAS for kind in ('rgb', 'depth')):
            raise RuntimeError('Broken dataset assumption')
        for i in range(num_steps):
            for camera in CAMERAS:
                conf = getattr(obs_config, f'{camera}_camera')
                for kind, wanted in (('rgb', conf.rgb), ('depth', conf.depth or conf.point_cloud),
                                     ('mask', conf.mask)):
                    if wanted:
                        setattr(obs[i], f'{camera}_{kind}', join(example_path, f'{camera}_{kind}', IMAGE_FORMAT % i))
            for name in ('joint_velocities', 'joint_positions', 'joint_forces', 'gripper_open', 'gripper_pose',
                         'gripper_joint_positions', 'gripper_touch_forces', 'task_low_dim_state'):
                if not getattr(obs_config, name):  # as upstream, gripper_matrix is left as stored
                    setattr(obs[i], name, None)
        if not image_paths:
            for i in range(num_steps):
                _load_images(obs[i], obs_config)
        demos.append(obs)
    return demos


def _load_images(observation, obs_config):
    for camera in CAMERAS:
        conf = getattr(obs_config, f'{camera}_camera')
        if conf.rgb:
            setattr(observation, f'{camera}_rgb', np.array(
                _resize_if_needed(Image.open(getattr(observation, f'{camera}_rgb')), conf.image_size)))
        if conf.depth or conf.point_cloud:
            depth = image_to_float_array(
                _resize_if_needed(Image.open(getattr(observation, f'{camera}_depth')), conf.image_size), DEPTH_SCALE)
            near = observation.misc[f'{camera}_camera_near']
            far = observation.misc[f'{camera}_camera_far']
            depth_m = near + depth * (far - near)
            if conf.depth:
                setattr(observation, f'{camera}_depth',
                        conf.depth_noise.apply(depth_m if conf.depth_in_meters else depth))
            else:
                setattr(observation, f'{camera}_depth', None)
            if conf.point_cloud:
                setattr(observation, f'{camera}_point_cloud', VisionSensor.pointcloud_from_depth_and_camera_params(
                    depth_m, observation.misc[f'{camera}_camera_extrinsics'],
                    observation.misc[f'{camera}_camera_intrinsics']))
        if conf.mask:
            setattr(observation, f'{camera}_mask', rgb_handles_to_mask(np.array(
                _resize_if_needed(Image.open(getattr(observation, f'{camera}_mask')), conf.image_size))))
