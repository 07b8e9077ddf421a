from task_checks import check_mjwarp, check_mujoco

TASK = "meat_off_grill"


def test_meat_off_grill_on_mujoco():
    check_mujoco(TASK, variations=2, first_description="take the chicken off the grill")


def test_meat_off_grill_on_mjwarp():
    check_mjwarp(TASK)
