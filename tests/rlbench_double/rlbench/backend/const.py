"""Dataset layout names, as upstream (rlbench/backend/const.py)."""

IMAGE_FORMAT = '%d.png'
EPISODES_FOLDER = 'episodes'
EPISODE_FOLDER = 'episode%d'
VARIATIONS_FOLDER = 'variation%d'
VARIATIONS_ALL_FOLDER = 'all_variations'
VARIATION_NUMBER = 'variation_number.pkl'
LOW_DIM_PICKLE = 'low_dim_obs.pkl'
VARIATION_DESCRIPTIONS = 'variation_descriptions.pkl'
TTT_FILE = 'task_design.ttt'
DEPTH_SCALE = 2**24 - 1
