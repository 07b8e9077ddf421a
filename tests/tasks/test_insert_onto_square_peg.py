"""insert_onto_square_peg on both embedded backends, its descriptions as upstream's, and a state that does
not tell the chosen spoke."""

from task_checks import check_descriptions, check_mjwarp, check_mujoco
from upstream_checks import check_state_hides_target, coloured

from rlbench_vec.backends.mujoco.tasks.base import COLORS
from rlbench_vec.backends.mujoco.tasks.insert_onto_square_peg import SPOKES

TASK = "insert_onto_square_peg"
# PerAct's RLBench fork (MohitShridhar/RLBench, branch peract), rlbench/tasks/insert_onto_square_peg.py:
# what init_episode returns, per variation.
UPSTREAM_DESCRIPTIONS = {
    0: [
        "put the ring on the red spoke",
        "slide the ring onto the red colored spoke",
        "place the ring onto the red spoke",
    ],
    19: [
        "put the ring on the white spoke",
        "slide the ring onto the white colored spoke",
        "place the ring onto the white spoke",
    ],
}


def test_insert_onto_square_peg_descriptions_are_upstreams_word_for_word():
    check_descriptions(TASK, UPSTREAM_DESCRIPTIONS)


def test_insert_onto_square_peg_on_mujoco():
    check_mujoco(TASK, variations=20, descriptions=UPSTREAM_DESCRIPTIONS[0])


def test_insert_onto_square_peg_on_mjwarp():
    check_mjwarp(TASK)


def test_insert_onto_square_peg_state_does_not_tell_the_chosen_spoke():
    # upstream draws the spoke of the variation's colour per episode (np.random.choice(spokes))
    check_state_hides_target(TASK, [(seed, 0) for seed in range(4)],
                             lambda sim, v: sim.world.position(coloured(sim, SPOKES, COLORS[v][1])))
