from task_checks import check_mjwarp, check_mujoco

TASK = "slide_block_to_color_target"


def test_slide_block_to_color_target_on_mujoco():
    check_mujoco(TASK, variations=4, first_description="slide the block to green target")


def test_slide_block_to_color_target_on_mjwarp():
    check_mjwarp(TASK)
