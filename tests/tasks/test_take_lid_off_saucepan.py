from task_checks import check_mjwarp, check_mujoco

TASK = "take_lid_off_saucepan"


def test_take_lid_off_saucepan_on_mujoco():
    check_mujoco(TASK, variations=1, first_description="take lid off the saucepan")


def test_take_lid_off_saucepan_on_mjwarp():
    check_mjwarp(TASK)
