from task_checks import check_mjwarp, check_mujoco

TASK = "light_bulb_in"


def test_light_bulb_in_on_mujoco():
    check_mujoco(TASK, variations=20, first_description="screw in the red light bulb")


def test_light_bulb_in_on_mjwarp():
    check_mjwarp(TASK)
