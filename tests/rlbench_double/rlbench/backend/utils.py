"""Image codecs of RLBench's datasets (rlbench/backend/utils.py): depth as a 24-bit integer spread over
R (high byte), G and B; masks as RGB-coded object handles."""

import numpy as np
from PIL import Image


def float_array_to_rgb_image(float_array, scale_factor=256000.0):
    scaled = np.clip(np.floor(float_array * scale_factor + 0.5), 0, 2**24 - 1).astype(np.uint32)
    rgb = np.stack([scaled // 65536, (scaled // 256) % 256, scaled % 256], axis=-1).astype(np.uint8)
    return Image.fromarray(rgb, mode='RGB')


def image_to_float_array(image, scale_factor=256000.0):
    array = np.array(image)
    return np.sum(array * [65536, 256, 1], axis=2) / scale_factor


def rgb_handles_to_mask(rgb_coded_handles):
    """handle = R + G * 256 + B * 256 * 256. Upstream does this arithmetic in the input's dtype: with
    uint8 images read from disk, NumPy >= 2 raises OverflowError at `* 256` (NumPy 1 upcast)."""
    if rgb_coded_handles.dtype != np.uint8:
        rgb_coded_handles *= 255  # sensor values in [0, 1]
    return (rgb_coded_handles[:, :, 0] + rgb_coded_handles[:, :, 1] * 256
            + rgb_coded_handles[:, :, 2] * 256 * 256)
