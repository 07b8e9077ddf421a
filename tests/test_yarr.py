"""rlbench_vec.cli.yarr: an agent written for YARR (act(step, observation, deterministic) returning an ActResult,
reset()) scored unchanged under --protocol peract on mujoco: every key, shape, dtype and leading [1, 1] of the
observation PerAct's environment builds, the time in low_dim_state, one act() per env and step, the 9-number
action read from .action; without a CLIP tokenizer, no lang_goal_tokens and the goal's text."""

from __future__ import annotations

import json
import textwrap

from rlbench_vec.cli.yarr import clip_tokenizer, time_value
from rlbench_vec.datasets import read_episode
from rlbench_vec.datasets.stored_episodes import stored_task_episodes
from rlbench_vec.evaluate import EvaluateConfig, evaluate

PERACT_CAMERAS = ("front", "left_shoulder", "right_shoulder", "wrist")
AGENT = textwrap.dedent("""
    import json
    import torch

    class ActResult:  # YARR's yarr.agents.agent.ActResult: what act() returns, the action in .action
        def __init__(self, action):
            self.action = action

    class Agent:  # the shape of YARR's Agent as PerAct's eval drives it
        def __init__(self, pose, record, size, tokens):
            self.pose, self.record, self.size, self.tokens, self.seen, self.resets = pose, record, size, tokens, [], 0

        def reset(self):
            self.resets += 1

        def act(self, step, observation, deterministic=False):
            assert deterministic is True
            expected = {"low_dim_state": ((4,), torch.float32), "ignore_collisions": ((1,), torch.float32)}
            for camera in ("front", "left_shoulder", "right_shoulder", "wrist"):
                expected[f"{camera}_rgb"] = ((3, self.size, self.size), torch.uint8)
                expected[f"{camera}_point_cloud"] = ((3, self.size, self.size), torch.float32)
                expected[f"{camera}_camera_extrinsics"] = ((4, 4), torch.float32)
                expected[f"{camera}_camera_intrinsics"] = ((3, 3), torch.float32)
            if self.tokens:  # CLIP's tokenize: 77 token ids
                assert tuple(observation.pop("lang_goal_tokens").shape) == (1, 1, 77)
            assert set(observation) == set(expected), sorted(observation)
            for key, (shape, dtype) in expected.items():
                value = observation[key]
                assert isinstance(value, torch.Tensor) and value.dtype == dtype, (key, type(value), value.dtype)
                assert tuple(value.shape) == (1, 1, *shape), (key, tuple(value.shape))
            gripper_open, finger_1, finger_2, time = observation["low_dim_state"][0, 0].tolist()
            assert gripper_open in (0.0, 1.0) and 0 <= finger_1 <= 0.04 and 0 <= finger_2 <= 0.04
            self.seen.append({"step": step, "time": time, "goal": observation.lang_goal,
                              "task": observation.info["task"], "resets": self.resets})
            with open(self.record, "w") as file:
                json.dump(self.seen, file)
            return ActResult(torch.tensor(self.pose + [1.0, 0.0]))  # hold still, open, collisions checked

    def make_agent(env, pose, record, size, tokens):
        return Agent(pose, record, size, tokens)
""")


def test_a_yarr_agent_runs_unchanged_under_peracts_protocol(stored_dataset, tmp_path):
    (tmp_path / "agent.py").write_text(AGENT)
    record = tmp_path / "seen.json"
    stored = stored_task_episodes(stored_dataset, "reach_target")[:2]
    start = read_episode(stored[0].path).observations["gripper_pose"][0].tolist()  # every episode starts there
    config = EvaluateConfig.of_protocol(
        "peract", policy=f"{tmp_path / 'agent.py'}:make_agent", tasks=("reach_target",), episodes=2, max_steps=3,
        image_size=(16, 16), episodes_from=str(stored_dataset), num_envs=2, backend="mujoco", out=str(tmp_path / "out"),
        policy_args={"pose": start, "record": str(record), "size": 16, "tokens": clip_tokenizer() is not None},
        progress=False)
    assert config.cameras == PERACT_CAMERAS and config.modalities == ("rgb", "point_cloud")
    result = evaluate(config)
    seen = json.loads(record.read_text())
    episodes = [json.loads(line) for line in (tmp_path / "out" / "log.jsonl").read_text().splitlines()
                if '"record": "episode"' in line]
    assert result["finished"] and result["invalid_actions"] == 0 and [e["steps"] for e in episodes] == [3, 3]
    assert len(seen) == 6 and sorted(s["step"] for s in seen) == [0, 0, 1, 1, 2, 2]  # one act() per env and step
    assert {s["step"]: s["time"] for s in seen} == {0: 1.0, 1: 0.0, 2: -1.0}
    assert [time_value(i, 25) for i in (0, 12, 24)] == [1.0, 0.0, -1.0]  # PerAct's 25 steps
    assert {s["goal"] for s in seen} == {e["description"] for e in episodes} and all(s["goal"] for s in seen)
    assert seen[-1]["resets"] == 2  # YARR's reset() before each episode
