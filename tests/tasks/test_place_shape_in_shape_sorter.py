"""place_shape_in_shape_sorter on both embedded backends, its descriptions as upstream's, and a state that does not tell
the chosen shape."""

from itertools import combinations

import numpy as np
from placement_checks import YawRange, check_placement
from task_checks import check_descriptions, check_mjwarp, check_mujoco, config
from upstream_checks import check_state_hides_target

from rlbench_vec.backends.mujoco.tasks.place_shape_in_shape_sorter import SHAPES

TASK = "place_shape_in_shape_sorter"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/place_shape_in_shape_sorter.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the cube in the shape sorter",
        "pick up the cube and put it in the sorter",
        "place the cube into its slot in the shape sorter",
        "slot the cube into the shape sorter",
    ],
    2: [
        "put the triangular prism in the shape sorter",
        "pick up the triangular prism and put it in the sorter",
        "place the triangular prism into its slot in the shape sorter",
        "slot the triangular prism into the shape sorter",
    ],
}


def test_place_shape_in_shape_sorter_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_place_shape_in_shape_sorter_on_mujoco():
    check_mujoco(TASK, variations=5, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_place_shape_in_shape_sorter_on_mjwarp():
    check_mjwarp(TASK)


def test_place_shape_in_shape_sorter_state_does_not_tell_the_chosen_shape():
    check_state_hides_target(TASK, [(0, v) for v in range(5)], lambda sim, v: sim.world.position(SHAPES[v]))


# Upstream's place_shape_in_shape_sorter.py: no base_rotation_bounds (Task's default +-3.14); the shapes sampled
# with SpawnBoundary.sample(s, min_distance=0.05) (its default rotation +-3.14).
def test_place_shape_in_shape_sorter_placement_is_upstreams():
    worlds = check_placement(TASK, (YawRange("shape_sorter", -3.14, 3.14), YawRange("star", -3.14, 3.14)), config(TASK))
    gaps = [min(np.linalg.norm(world.position(a)[:2] - world.position(b)[:2]) for a, b in combinations(SHAPES, 2))
            for world in worlds]
    assert min(gaps) >= 0.05 and min(gaps) < 0.07, f"closest shapes {min(gaps):.3f} m apart"
