from rlbench.tasks.empty_container import EmptyContainer
from rlbench.tasks.open_drawer import OpenDrawer
from rlbench.tasks.pick_and_lift import PickAndLift
from rlbench.tasks.reach_target import ReachTarget
