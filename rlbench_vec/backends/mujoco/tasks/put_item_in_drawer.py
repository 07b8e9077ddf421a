"""put_item_in_drawer (PerAct's RLBench fork, MohitShridhar/RLBench branch `peract`:
rlbench/tasks/put_item_in_drawer.py): open the bottom, middle or top drawer (the variation, 3) of
open_drawer's cabinet and put the block in it.

Success (as RLBench): the block detected by the chosen drawer's region (it moves with the drawer).
Placement: the cabinet turns ±π/8, upstream's `base_rotation_bounds` ([0, 0, - np.pi / 8], [0, 0, np.pi / 8]).
The block (`item`, placed in upstream's scene file: the task file samples nothing) starts on top of the chest
of drawers as upstream's, here 4 cm behind its front edge, anywhere along it, with yaw ±π.
Departures: the drawers are open_drawer's box-built ones, the cabinet nearer than open_drawer's (centre
0.42-0.46 m against 0.48-0.56 m: on its 45 cm top a top-down grasp reaches out to x = 0.40 m); the oracle
opens the drawer with a pitched hand, takes the block from the top and brings it down in front of the
drawers, clear of the handles above the chosen one, before moving it in over the opening. State: as
open_drawer's (the three handles' xyz, the three drawers' openings), then the block's xyz."""

from __future__ import annotations

import math

import numpy as np

from ..geometry import yaw_rotation
from ..scene import Scene, axis_angle_quat
from .base import Waypoint, World, body_position, body_yaw, square_yaw, top_down_quat
from .conditions import DetectedCondition
from .objects import free_box, region
from .open_drawer import OPTIONS, OpenDrawer

# A loose object that also rests on articulated parts (scene.py's groups: the drawers collide with the
# robot only, so SCENERY would fall through them).
RESTS_IN_DRAWERS = {"contype": "1", "conaffinity": "7"}


class PutItemInDrawer(OpenDrawer):
    name = "put_item_in_drawer"
    ITEM_HALF = 0.02
    CENTRE_X = (0.42, 0.46)  # nearer than open_drawer's: the block on top lies within a top-down hand's reach
    ON_TOP_INSET = 0.04  # the block's centre behind the cabinet's front edge
    CLEAR_OF_HANDLES = 0.07  # the carried block comes down this far in front of the drop, clear of the handles
    # Metres the oracle opens the drawer: room for the block, and for the hand coming down over the drop
    # clear of the handle of the drawer above (at 0.13 m the hand landed on that handle and let go there).
    PULL = 0.17
    DROP_DEPTH = 0.065  # the block is set down this far behind the drawer's front
    OVER_FRONT = 0.085  # carried this high above the drop: the block clears the drawer's front, in reach
    BACK_OFF = 0.08  # the hand's retreat from the handle, along its approach

    FLOOR = 0.037  # a drawer's floor below its centre

    def build(self, scene: Scene) -> None:
        super().build(scene)
        bodies = {body.get("name"): body for body in scene.worldbody.iter("body")}
        for option in OPTIONS:
            region(bodies[f"drawer_{option}"], f"success_{option}",
                   half_size=(self.DEPTH / 2 - 0.03, self.WIDTH / 2 - 0.025, 0.04),
                   position=(self.DEPTH / 2 - 0.01, 0, 0.04 - self.FLOOR))
        item = free_box(scene.worldbody, "item", (self.ITEM_HALF,) * 3, rgba=(0.9, 0.5, 0.1, 1.0), mass=0.05)
        next(item.iter("geom")).attrib.update(RESTS_IN_DRAWERS)

    def descriptions(self, variation: int) -> list[str]:
        option = OPTIONS[variation]
        return [f"put the item in the {option} drawer", f"put the block away in the {option} drawer",
                f"open the {option} drawer and place the block inside of it", f"leave the block in the {option} drawer"]

    def init_episode(self, world: World, variation: int, rng: np.random.Generator) -> None:
        cabinet, yaw = self.place_cabinet(world, rng)
        # On top of the cabinet, near its front edge (upstream's item starts on top of the chest of drawers).
        top = self.PLINTH + 3 * self.SLOT + self.TOP
        local = (-self.DEPTH / 2 + self.ON_TOP_INSET, rng.uniform(-0.15, 0.15), top + self.ITEM_HALF)
        world.set_pose("item", cabinet + yaw_rotation(yaw) @ local,
                       axis_angle_quat((0, 0, 1), rng.uniform(-math.pi, math.pi)))

    def success(self, variation: int) -> DetectedCondition:
        return DetectedCondition("item", f"success_{OPTIONS[variation]}")

    def low_dim_state(self, variation: int):
        return (*super().low_dim_state(variation), body_position("item"))

    def oracle(self, world: World, variation: int) -> list[Waypoint]:
        approach, reach, grip = super().oracle(world, variation)[:3]  # to the handle, onto it, fingers closed
        cabinet, cabinet_yaw = world.position("cabinet"), body_yaw(world.quat("cabinet"))
        rotation = yaw_rotation(cabinet_yaw)
        opened = reach.position + rotation @ [-self.PULL, 0.0, 0.0]
        outwards = approach.position - reach.position
        back_off = self.BACK_OFF * outwards / np.linalg.norm(outwards)
        item = world.position("item")
        # Near the drawers the hand keeps its long side across the cabinet, clear of their fronts; it turns
        # to the block's yaw only above the block.
        item_yaw = cabinet_yaw + square_yaw(body_yaw(world.quat("item")) - cabinet_yaw, math.pi / 2)
        item_quat, across_quat = top_down_quat(item_yaw), top_down_quat(cabinet_yaw)
        drawer_floor = self.PLINTH + (variation + 0.5) * self.SLOT - self.FLOOR
        drop = cabinet + rotation @ [-self.DEPTH / 2 - self.PULL + self.DROP_DEPTH, 0.0,
                                     drawer_floor + self.ITEM_HALF + 0.01]
        clear = drop + rotation @ [-self.CLEAR_OF_HANDLES, 0.0, 0.0]
        up, over = np.array([0.0, 0.0, 0.1]), np.array([0.0, 0.0, self.OVER_FRONT])
        lifted = np.array([item[0], item[1], max(drop[2] + self.OVER_FRONT, item[2] + 0.03)])
        return [
            approach, reach, grip,
            Waypoint(opened, grip.quat, False, straight=True),
            Waypoint(opened, grip.quat, True),
            Waypoint(opened + back_off, grip.quat, True, straight=True),
            Waypoint(opened + back_off + [0.0, 0.0, 0.06], grip.quat, True, straight=True),
            Waypoint(opened + back_off + [0.0, 0.0, 0.06], across_quat, True),
            # In straight moves: a free swing of the arm can shut the drawer again.
            Waypoint(item + up, across_quat, True, straight=True),
            Waypoint(item + up, item_quat, True),
            Waypoint(item, item_quat, True, straight=True),
            Waypoint(item, item_quat, False),
            Waypoint(item + [0.0, 0.0, 0.03], item_quat, False, straight=True),
            Waypoint(item + [0.0, 0.0, 0.03], across_quat, False),  # turned below the handles
            Waypoint(lifted, across_quat, False, straight=True),
            # Down in front of the drawers clear of the handles above the chosen one, then in over its opening.
            Waypoint(np.array([*clear[:2], lifted[2]]), across_quat, False, straight=True),
            Waypoint(clear + over, across_quat, False, straight=True),
            Waypoint(drop + over, across_quat, False, straight=True),
            Waypoint(drop, across_quat, False, straight=True),
            Waypoint(drop, across_quat, True),
            Waypoint(drop + up, across_quat, True, straight=True),
        ]


TASK = PutItemInDrawer
