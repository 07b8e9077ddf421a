from task_checks import check_mjwarp, check_mujoco

TASK = "stack_blocks"


def test_stack_blocks_on_mujoco():
    check_mujoco(TASK, variations=60, first_description="stack 2 red blocks")


def test_stack_blocks_on_mjwarp():
    check_mjwarp(TASK)
