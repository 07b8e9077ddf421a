"""NVIDIA's GLX inside per-worker Xvfb, on a GPU machine: what a GLX client gets, on which GPU, how its
images compare with Mesa's, and mujoco glfw throughput. Run by `scripts/glx_gpu_check.sh run`, which
provides Xvfb, Mesa and the wheels; runs anywhere with Xvfb (without an NVIDIA GPU the NVIDIA parts
report what is missing). Writes OUT/glx_gpu_check.json after every section (a run cut short still
reports) and OUT/glx_images.png (Mesa | NVIDIA | 8 x difference, for the FBO program and mujoco);
images in between go to a temporary folder (OUT gets few files back from the GPU machine).

    python scripts/glx_gpu_check.py --out OUT [--seconds 8] [--num_envs 1 4 16 64]

Sections:
  host       nvidia-smi's GPUs and driver, NVIDIA's GLX library, the GPUs rlbench_vec.display sees, the
             GPU-choosing variable names the driver's GL libraries mention
  probe      the display self-test in a fresh Xvfb, Mesa vendor then NVIDIA vendor: GL strings, direct
             rendering, device UUID and the nvidia-smi GPU it names
  selection  which variables put a GLX context on which GPU, for every GPU; open_display('xvfb-gpu')
             for one worker per GPU
  fbo        tests/programs/glx_fbo_readback.py (offscreen FBO render + glReadPixels, as CoppeliaSim's
             vision sensors; 512x512, at least 100 frames and 4 s) under Mesa and NVIDIA: frames/s
             and image differences; nvidia-smi's process list while the NVIDIA one runs
  mujoco     benchmarks/glx_throughput.py, xvfb-cpu vs xvfb-gpu per env count: env-steps/s, each
             worker's renderer and GPU; nvidia-smi during the 16-env GPU run; env 0's first
             observation compared between Mesa and NVIDIA
Images count as equal within tolerance when >= 99 % of pixels differ by <= 8 levels (rgb; max over
channels), <= 1e-3 of the depth range (depth), not at all (mask).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from rlbench_vec import display as displays  # noqa: E402
from rlbench_vec.cli import ArgumentParser, run_main  # noqa: E402
from rlbench_vec.display import glcheck, xvfb  # noqa: E402  (after the sys.path line above)

FBO_PROGRAM = REPO / "tests" / "programs" / "glx_fbo_readback.py"
RGB_LEVELS, DEPTH_FRACTION, SHARE = 8, 1e-3, 0.99
PROCESS_ROW = re.compile(r"\|\s+(\d+)\s+\S+\s+\S+\s+(\d+)\s+(C\+G|G|C)\s+(\S+)\s+(\S+)\s*\|")


def command(*argv: str, env: dict | None = None, timeout: float = 60) -> str:
    try:
        result = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout, env=env)
        return (result.stdout + result.stderr).strip()
    except (OSError, subprocess.SubprocessError) as error:
        return f"{type(error).__name__}: {error}"


def nvidia_smi() -> dict[str, Any]:
    """GPUs (index, uuid, utilisation, memory) and the processes on each, graphics ones included."""
    gpus = command("nvidia-smi", "--query-gpu=index,uuid,name,driver_version,utilization.gpu,memory.used",
                   "--format=csv,noheader")
    table = command("nvidia-smi")
    processes = [{"gpu": int(gpu), "pid": int(pid), "type": kind, "name": name, "memory": memory}
                 for gpu, pid, kind, name, memory in PROCESS_ROW.findall(table)]
    return {"gpus": gpus.splitlines(), "processes": processes, "table_tail": table[-2500:]}


def gpu_of_uuid(uuid: str | None, smi_gpus: list[str]) -> int | None:
    for row in smi_gpus:
        fields = [field.strip() for field in row.split(",")]
        if uuid and len(fields) > 1 and fields[1] == uuid:
            return int(fields[0])
    return None


def compare(mesa: np.ndarray, nvidia: np.ndarray, kind: str) -> dict[str, Any]:
    """Per-pixel agreement of two renderers' images of one scene."""
    if mesa.shape != nvidia.shape:
        return {"shapes": [list(mesa.shape), list(nvidia.shape)], "within_tolerance": False}
    if kind == "rgb":
        difference = np.abs(mesa.astype(int) - nvidia.astype(int)).max(axis=-1)
        share = float(np.mean(difference <= RGB_LEVELS))
        return {"mean_abs": round(float(difference.mean()), 3), "max_abs": int(difference.max()),
                "share_within": round(share, 5), "within_tolerance": share >= SHARE}
    if kind == "depth":
        span = float(max(np.ptp(mesa), 1e-9))
        difference = np.abs(mesa.astype(np.float64) - nvidia.astype(np.float64))
        share = float(np.mean(difference <= DEPTH_FRACTION * span))
        return {"max_abs": float(difference.max()), "span": span, "share_within": round(share, 5),
                "within_tolerance": share >= SHARE}
    share = float(np.mean(mesa == nvidia))
    return {"share_equal": round(share, 5), "within_tolerance": share >= SHARE}


def kind_of(key: str) -> str:
    return "rgb" if key.endswith("rgb") else "depth" if key.endswith("depth") else "mask"


class Report:
    def __init__(self, out: Path, deadline: float):
        self.out, self.deadline, self.data = out, deadline, {}
        self.scratch = Path(tempfile.mkdtemp(prefix="glx-check-"))
        self.images: list[np.ndarray] = []

    def left_s(self) -> float:
        return self.deadline - time.time()

    def section(self, name: str, work: Callable[[dict], None]) -> None:
        self.data[name] = result = {}
        start = time.time()
        try:
            work(result)
        except Exception:  # noqa: BLE001 (a failed section is reported; the next ones still run)
            result["error"] = traceback.format_exc()[-3000:]
        result["seconds"] = round(time.time() - start, 1)
        (self.out / "glx_gpu_check.json").write_text(json.dumps(self.data, indent=1, default=str))
        print(f"[{name}] {json.dumps(result, default=str)[:1500]}", flush=True)

    def add_images(self, mesa: np.ndarray, nvidia: np.ndarray) -> None:
        """One row of the montage: Mesa | NVIDIA | 8 x |difference|, as uint8 rgb."""
        difference = np.clip(np.abs(mesa.astype(int) - nvidia.astype(int)) * 8, 0, 255).astype(np.uint8)
        self.images.append(np.concatenate([mesa, nvidia, difference], axis=1))

    def save_montage(self) -> None:
        if not self.images:
            return
        import imageio.v2 as imageio

        width = max(image.shape[1] for image in self.images)
        rows = [np.pad(image, ((0, 4), (0, width - image.shape[1]), (0, 0))) for image in self.images]
        imageio.imwrite(self.out / "glx_images.png", np.concatenate(rows))


def host(result: dict) -> None:
    result["python"] = sys.version.split()[0]
    result["machine"] = platform.platform()
    result["nvidia_smi"] = nvidia_smi()
    result["nvidia_glx_library"] = library = glcheck.nvidia_glx_library()
    result["display_sees"] = [gpu.__dict__ for gpu in glcheck.nvidia_gpus()]
    result["ld_library_path"] = os.environ.get("LD_LIBRARY_PATH")
    names: set[str] = set()
    folder = Path(library).resolve().parent if library else None
    for pattern in ("libGLX_nvidia.so.*", "libnvidia-glcore.so.*", "libnvidia-eglcore.so.*"):
        for path in folder.glob(pattern) if folder else ():
            names |= {m.decode() for m in re.findall(rb"__(?:NV|GL)_[A-Z0-9_]{3,}", path.read_bytes())}
    result["driver_gl_variables_naming_a_gpu"] = sorted(
        name for name in names if re.search("GPU|DEVICE|PRIME|VISIBLE|OFFLOAD|SCREEN", name))
    for tool in ("Xvfb", "xkbcomp"):
        result[f"{tool}_missing_libraries"] = [line.strip() for line in command(
            "sh", "-c", f"ldd $(command -v {tool} || echo /usr/bin/{tool}) 2>&1").splitlines() if "not found" in line]


def probe(result: dict) -> None:
    display = xvfb.start_xvfb()
    smi = nvidia_smi()["gpus"]
    try:
        for vendor in ("mesa", "nvidia"):
            try:
                info = glcheck.probe_gl({**display.environ, displays.VENDOR_ENV: vendor})
                result[vendor] = {**info.__dict__, "nvidia_smi_gpu": [gpu_of_uuid(u, smi) for u in info.device_uuids]}
            except displays.BackendUnavailableError as error:
                result[vendor] = {"error": str(error)}
    finally:
        display.close()


def selection(result: dict) -> None:
    gpus, smi = glcheck.nvidia_gpus(), nvidia_smi()["gpus"]
    display = xvfb.start_xvfb()
    try:
        base = {**display.environ, displays.VENDOR_ENV: "nvidia"}
        for gpu in gpus:
            tried = {"driver's choice": {}}
            tried.update({f"selector {i}": select(gpu) for i, select in enumerate(displays._GPU_SELECTORS)})
            for name, variables in tried.items():
                try:
                    info = glcheck.probe_gl({**base, **variables})
                    got = [gpu_of_uuid(u, smi) for u in info.device_uuids]
                except displays.BackendUnavailableError as error:
                    got = f"no context: {str(error)[-300:]}"
                result.setdefault(f"asked GPU {gpu.index}", []).append({"how": name, "variables": variables,
                                                                        "got": got})
            if len(gpus) > 1:  # hiding the other GPUs' device nodes, as containers do
                hide = " ".join(f"mount --bind /dev/null /dev/nvidia{g.minor};" for g in gpus if g != gpu)
                code = "from rlbench_vec.display.glcheck import print_gl_info; print_gl_info()"
                output = command("unshare", "-m", "sh", "-c", f"{hide} exec {sys.executable} -c '{code}'",
                                 env={**os.environ, **base})
                try:
                    got = [gpu_of_uuid(u, smi) for u in json.loads(output.splitlines()[-1])["device_uuids"]]
                except (ValueError, KeyError, IndexError):
                    got = output[-300:]
                result[f"asked GPU {gpu.index}"].append({"how": "other /dev/nvidia* hidden", "got": got})
    finally:
        display.close()
    result["open_display_xvfb_gpu"] = []
    for worker in range(max(len(gpus), 1)):
        try:
            opened = displays.open_display("xvfb-gpu", True, worker)
            facts = opened.facts()
            opened.close()
        except displays.BackendUnavailableError as error:
            facts = {"error": str(error)}
        result["open_display_xvfb_gpu"].append(facts)


def fbo(report: Report, result: dict) -> None:
    display = xvfb.start_xvfb()
    images = {}
    try:
        for vendor in ("mesa", "nvidia"):
            folder = report.scratch / "fbo" / vendor
            env = {**os.environ, **display.environ, displays.VENDOR_ENV: vendor}
            process = subprocess.Popen([sys.executable, str(FBO_PROGRAM), str(folder), "--size", "512",
                                        "--frames", "100", "--min_seconds", "4"], stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True, env=env)
            during = None
            if vendor == "nvidia":
                time.sleep(2.5)  # past context creation: the process renders now, for 4 s
                smi = nvidia_smi()
                during = {"pid": process.pid, "listed": [p for p in smi["processes"] if p["pid"] == process.pid],
                          "all_processes": smi["processes"], "gpus": smi["gpus"]}
            stdout, stderr = process.communicate(timeout=max(report.left_s(), 30))
            if process.returncode != 0:
                result[vendor] = {"error": stderr[-2000:]}
                continue
            result[vendor] = {**json.loads(stdout.splitlines()[-1]), "nvidia_smi_during": during}
            images[vendor] = {kind: np.load(folder / f"{kind}.npy") for kind in ("rgb", "depth")}
    finally:
        display.close()
    if len(images) == 2:
        result["compare"] = {kind: compare(images["mesa"][kind], images["nvidia"][kind], kind)
                             for kind in ("rgb", "depth")}
        report.add_images(images["mesa"]["rgb"], images["nvidia"]["rgb"])


def mujoco(report: Report, result: dict, num_envs: list[int], seconds: float) -> None:
    import glx_throughput

    result["runs"] = runs = []
    start_estimate_s = {1: 10, 4: 15, 16: 30, 64: 90}
    folder = report.scratch / "mujoco_first_obs"
    for count in num_envs:
        for mode in ("xvfb-cpu", "xvfb-gpu"):
            if report.left_s() < 2 * seconds + start_estimate_s.get(count, 90):
                runs.append({"mode": mode, "num_envs": count, "skipped": "out of time"})
                continue
            during = (lambda env: nvidia_smi()) if (mode == "xvfb-gpu" and count == 16) else None
            try:
                run = glx_throughput.run(mode, count, seconds, folder if count == num_envs[0] else None, during)
                if run["during"]:  # which GPU nvidia-smi lists each worker on
                    pids = set(run["worker_pids"])
                    listed = [p["gpu"] for p in run["during"]["processes"] if p["pid"] in pids]
                    run["workers_by_nvidia_smi_gpu"] = {gpu: listed.count(gpu) for gpu in sorted(set(listed))}
                runs.append(run)
            except Exception:  # noqa: BLE001 (reported; the other runs still run)
                runs.append({"mode": mode, "num_envs": count, "error": traceback.format_exc()[-2000:]})
            print(f"[mujoco] {json.dumps(runs[-1], default=str)[:600]}", flush=True)
    if (folder / "xvfb-cpu.npz").exists() and (folder / "xvfb-gpu.npz").exists():
        mesa, nvidia = np.load(folder / "xvfb-cpu.npz"), np.load(folder / "xvfb-gpu.npz")
        result["compare_first_obs"] = {key: compare(mesa[key], nvidia[key], kind_of(key)) for key in mesa.files}
        report.add_images(np.repeat(np.repeat(mesa["front_rgb"], 2, 0), 2, 1),
                          np.repeat(np.repeat(nvidia["front_rgb"], 2, 0), 2, 1))


def main() -> None:
    parser = ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seconds", type=float, default=8.0, help="timed stepping per mujoco run")
    parser.add_argument("--num_envs", type=int, nargs="+", default=[1, 4, 16, 64])
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    report = Report(args.out, float(os.environ.get("GLX_CHECK_DEADLINE", time.time() + 450)))
    report.section("host", host)
    report.section("probe", probe)
    report.section("selection", selection)
    report.section("fbo", lambda result: fbo(report, result))
    report.section("mujoco", lambda result: mujoco(report, result, args.num_envs, args.seconds))
    report.save_montage()
    swept = xvfb.sweep_stale_displays()
    print(f"done in {report.data['mujoco']['seconds']} s of mujoco; stale displays swept: {swept}", flush=True)


if __name__ == "__main__":
    run_main(main, "python scripts/glx_gpu_check.py")
