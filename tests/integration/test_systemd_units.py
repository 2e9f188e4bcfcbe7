"""The systemd units in systemd/ (docs/contracts.md#systemd-units): required directives, and
systemd's own checks.

The directive checks run everywhere. `systemd-analyze verify` (syntax, known keys and values,
dependencies that resolve, executables that exist), `systemd-analyze security --offline`
(the exposure score) and `systemd-sysusers` (the user file) run where those tools are
installed and are skipped with a reason where not.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT_DIR = ROOT / "systemd"
TARGET = "lockwarden.target"
SERVICES = {
    "lockwarden-wconfd.service": "lw-wconfd",
    "lockwarden-luxid.service": "lw-luxid",
    "lockwarden-rapi.service": "lw-rapi",
}
UNITS = [*SERVICES, TARGET]
DAEMONS = ["lockwarden-wconfd.service", "lockwarden-luxid.service"]  # sharing their dirs
RAPI = "lockwarden-rapi.service"
STATE_DIR = "/var/lib/lockwarden"
RAPI_STATE_DIR = "/var/lib/lockwarden-rapi"
RUN_DIR = "/run/lockwarden"
BIN_DIR = "/usr/local/bin"

HARDENING_YES = [
    "NoNewPrivileges",
    "ProtectHome",
    "PrivateTmp",
    "PrivateDevices",
    "ProtectKernelTunables",
    "ProtectKernelModules",
    "ProtectKernelLogs",
    "ProtectControlGroups",
    "ProtectClock",
    "ProtectHostname",
    "RestrictNamespaces",
    "RestrictRealtime",
    "RestrictSUIDSGID",
    "LockPersonality",
]
ADDRESS_FAMILIES = {
    "lockwarden-wconfd.service": {"AF_UNIX"},
    "lockwarden-luxid.service": {"AF_UNIX"},
    "lockwarden-rapi.service": {"AF_UNIX", "AF_INET", "AF_INET6"},
}


@dataclass
class Unit:
    """A parsed unit file: section -> key -> every value assigned, in order."""

    name: str
    sections: dict[str, dict[str, list[str]]] = field(default_factory=dict)

    def all(self, section: str, key: str) -> list[str]:
        """Every assignment of `key`, honouring systemd's "empty value resets the list"."""
        values: list[str] = []
        for value in self.sections.get(section, {}).get(key, []):
            if value == "":
                values = []
            else:
                values.append(value)
        return values

    def get(self, section: str, key: str) -> str | None:
        """The effective (last) value of a single-valued key, or None if not set."""
        values = self.sections.get(section, {}).get(key)
        return values[-1] if values else None

    def words(self, section: str, key: str) -> list[str]:
        """A list-valued key (Requires=, After=, ...) split into its items."""
        return [word for value in self.all(section, key) for word in value.split()]


def parse_unit(path: Path) -> Unit:
    """Parse a unit file the way systemd does for our purposes: sections, repeated keys,
    comments (# and ;) and backslash line continuations."""
    unit = Unit(path.name)
    section: dict[str, list[str]] | None = None
    pending = ""
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line[0] in "#;"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = pending + line, ""
        if line.startswith("[") and line.endswith("]"):
            section = unit.sections.setdefault(line[1:-1], {})
            continue
        assert section is not None, f"{path.name}:{lineno}: assignment outside a section"
        assert "=" in line, f"{path.name}:{lineno}: not KEY=VALUE: {line!r}"
        key, value = (part.strip() for part in line.split("=", 1))
        section.setdefault(key, []).append(value)
    assert not pending, f"{path.name}: file ends in a line continuation"
    return unit


def seconds(value: str) -> float:
    """A systemd time span ("30", "30s", "1min", "1min 30s") in seconds."""
    units = {"": 1.0, "s": 1.0, "sec": 1.0, "ms": 0.001, "m": 60.0, "min": 60.0, "h": 3600.0}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", value):
        total += float(number) * units[unit]
    return total


@pytest.fixture(scope="module")
def units() -> dict[str, Unit]:
    return {name: parse_unit(UNIT_DIR / name) for name in UNITS}


def exec_start(unit: Unit) -> list[str]:
    commands = unit.all("Service", "ExecStart")
    assert len(commands) == 1, f"{unit.name}: exactly one ExecStart"
    return shlex.split(commands[0])


def option(argv: list[str], flag: str) -> str | None:
    """The value of `--flag VALUE` or `--flag=VALUE` in argv, or None."""
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


# --- the files ------------------------------------------------------------------------------


def test_the_unit_files_are_exactly_these() -> None:
    found = {p.name for p in UNIT_DIR.iterdir() if p.suffix in {".service", ".target"}}
    assert found == set(UNITS)


def test_every_unit_parses_and_has_a_description(units: dict[str, Unit]) -> None:
    for unit in units.values():
        assert unit.get("Unit", "Description"), unit.name


# --- every service --------------------------------------------------------------------------


@pytest.mark.parametrize("name", SERVICES)
def test_service_notifies_and_is_watched(units: dict[str, Unit], name: str) -> None:
    unit = units[name]
    assert unit.get("Service", "Type") == "notify"
    assert unit.get("Service", "NotifyAccess") == "main"  # job processes cannot speak for it
    watchdog = unit.get("Service", "WatchdogSec")
    assert watchdog is not None, "WatchdogSec"
    # Long enough for a GC pause or a big fsync, short enough to matter.
    assert 10 <= seconds(watchdog) <= 120
    assert unit.get("Service", "Restart") == "on-failure"


@pytest.mark.parametrize("name", DAEMONS)
def test_service_directories(units: dict[str, Unit], name: str) -> None:
    unit = units[name]
    assert unit.get("Service", "RuntimeDirectory") == "lockwarden"
    # Shared by three units: stopping one must not delete the others' sockets.
    assert unit.get("Service", "RuntimeDirectoryPreserve") == "yes"
    assert unit.get("Service", "StateDirectory") == "lockwarden"


def test_shared_directories_have_one_owner_and_mode(units: dict[str, Unit]) -> None:
    # systemd re-owns and re-modes a shared directory at every start: units must agree.
    for key in ("User", "Group", "RuntimeDirectoryMode", "StateDirectoryMode"):
        values = {units[name].get("Service", key) for name in DAEMONS}
        assert len(values) == 1, f"{key} differs between units: {values}"
    assert units["lockwarden-wconfd.service"].get("Service", "Group") == "lockwarden"


@pytest.mark.parametrize("name", SERVICES)
def test_exec_start_runs_the_console_script_with_the_unit_directories(
    units: dict[str, Unit], name: str
) -> None:
    unit = units[name]
    argv = exec_start(unit)
    assert argv[0] == f"{BIN_DIR}/{SERVICES[name]}"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert SERVICES[name] in scripts, "ExecStart names a console script of the package"
    assert option(argv, "--state-dir") == f"/var/lib/{unit.get('Service', 'StateDirectory')}"
    assert option(argv, "--run-dir") == RUN_DIR
    if name != RAPI:  # rapi has no socket of its own
        assert option(argv, "--group") == unit.get("Service", "Group")


@pytest.mark.parametrize("name", SERVICES)
def test_environment_points_children_at_the_same_directories(
    units: dict[str, Unit], name: str
) -> None:
    env: dict[str, str] = {}
    for value in units[name].all("Service", "Environment"):
        for item in shlex.split(value):
            key, _, val = item.partition("=")
            env[key] = val
    assert env.get("LW_RUN_DIR") == RUN_DIR
    assert env.get("LW_STATE_DIR") == (RAPI_STATE_DIR if name == RAPI else STATE_DIR)


@pytest.mark.parametrize("name", SERVICES)
def test_service_hardening(units: dict[str, Unit], name: str) -> None:
    unit = units[name]
    for key in HARDENING_YES:
        assert unit.get("Service", key) == "yes", key
    assert unit.get("Service", "ProtectSystem") == "strict"
    assert set(unit.words("Service", "RestrictAddressFamilies")) == ADDRESS_FAMILIES[name]
    assert unit.get("Service", "User") not in {None, "root", "0"}, "runs unprivileged"
    assert unit.get("Service", "CapabilityBoundingSet") == ""


@pytest.mark.parametrize("name", SERVICES)
def test_service_avoids_hardening_that_breaks_lockwarden(units: dict[str, Unit], name: str) -> None:
    unit = units[name]
    # Hiding other users' processes breaks SO_PEERCRED identity checks and death detection.
    assert unit.get("Service", "ProtectProc") in {None, "default"}
    # psutil's process start times need /proc/stat (boot time).
    assert unit.get("Service", "ProcSubset") in {None, "all"}
    # A dynamic uid would differ per unit and per start: shared dirs and surviving jobs break.
    assert unit.get("Service", "DynamicUser") in {None, "no"}
    # Another user namespace maps peers' uids away (SO_PEERCRED).
    assert unit.get("Service", "PrivateUsers") in {None, "no"}


@pytest.mark.parametrize("name", SERVICES)
def test_service_belongs_to_the_target(units: dict[str, Unit], name: str) -> None:
    unit = units[name]
    assert unit.words("Install", "WantedBy") == [TARGET]
    assert TARGET in unit.words("Unit", "PartOf")


# --- per service ----------------------------------------------------------------------------


def test_luxid_requires_wconfd_and_spares_job_processes(units: dict[str, Unit]) -> None:
    luxid = units["lockwarden-luxid.service"]
    assert "lockwarden-wconfd.service" in luxid.words("Unit", "Requires")
    assert "lockwarden-wconfd.service" in luxid.words("Unit", "After")
    # Job processes must survive a luxid stop/restart/crash (KillMode=process).
    assert luxid.get("Service", "KillMode") == "process"


def test_wconfd_depends_on_no_other_lockwarden_daemon(units: dict[str, Unit]) -> None:
    wconfd = units["lockwarden-wconfd.service"]
    for key in ("Requires", "Wants", "After", "BindsTo"):
        assert not [w for w in wconfd.words("Unit", key) if w.startswith("lockwarden-")], key
    assert wconfd.get("Service", "KillMode") in {None, "control-group"}


def test_rapi_runs_apart_from_the_state(units: dict[str, Unit]) -> None:
    rapi = units[RAPI]
    assert rapi.get("Service", "User") == "lockwarden-rapi"
    assert rapi.words("Service", "SupplementaryGroups") == ["lockwarden"]  # the sockets
    assert rapi.get("Service", "StateDirectory") == "lockwarden-rapi"
    assert option(exec_start(rapi), "--state-dir") == RAPI_STATE_DIR
    # The daemons' directories are not its own: systemd would re-own them to lockwarden-rapi.
    assert rapi.get("Service", "RuntimeDirectory") is None
    assert not [p for p in rapi.words("Service", "ReadWritePaths") if "lockwarden" in p]


def test_rapi_wants_both_daemons(units: dict[str, Unit]) -> None:
    rapi = units["lockwarden-rapi.service"]
    for daemon in ("lockwarden-wconfd.service", "lockwarden-luxid.service"):
        assert daemon in rapi.words("Unit", "Wants")
        assert daemon in rapi.words("Unit", "After")
    argv = exec_start(rapi)
    assert option(argv, "--port") == "5080"


def test_target_is_wanted_by_multi_user_and_enables_all_services(
    units: dict[str, Unit],
) -> None:
    target = units[TARGET]
    assert target.words("Install", "WantedBy") == ["multi-user.target"]
    assert set(target.words("Install", "Also")) == set(SERVICES)


# --- systemd's own tools --------------------------------------------------------------------


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian/Ubuntu: apt-get install systemd)")
    return path


def _run(argv: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEMD_COLORS": "0", "LANG": "C.UTF-8"}
    return subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


def _copy_with_real_executables(dest: Path) -> list[Path]:
    """Copy the units to `dest`, pointing ExecStart at executables that exist here.

    `verify` fails on an ExecStart binary that does not exist, and /usr/local/bin/lw-* is an
    install-time path. Pointing it at this interpreter's console scripts keeps the check
    meaningful: the script the unit names must be installed under that name. Without them
    (tests run from a bare checkout) `true` stands in, and everything else is still checked.
    """
    bin_dir = Path(sys.executable).parent
    copies = []
    for name in UNITS:
        text = (UNIT_DIR / name).read_text()
        for script in SERVICES.values():
            real = bin_dir / script
            stand_in = str(real) if real.is_file() else (shutil.which("true") or "/bin/true")
            text = text.replace(f"{BIN_DIR}/{script} ", f"{stand_in} ")
        assert f"{BIN_DIR}/lw" not in text, f"{name}: ExecStart not rewritten"
        copy = dest / name
        copy.write_text(text)
        copies.append(copy)
    return copies


def test_systemd_analyze_verify(tmp_path: Path) -> None:
    tool = _tool("systemd-analyze")
    copies = _copy_with_real_executables(tmp_path)
    argv = [tool, "verify", "--man=no"]
    if "--recursive-errors" in _run([tool, "--help"]).stdout:
        argv.append("--recursive-errors=no")  # judge our units, not the host's
    result = _run([*argv, *map(str, copies)], cwd=tmp_path)
    output = (result.stdout + result.stderr).strip()
    # verify exits 0 on "Unknown key", "Failed to parse ..., ignoring" and friends and only
    # prints them: any message about our units is a failure, whatever the exit code.
    ours = [line for line in output.splitlines() if "lockwarden" in line]
    assert result.returncode == 0 and not ours, output


def test_systemd_analyze_security_exposure(tmp_path: Path) -> None:
    tool = _tool("systemd-analyze")
    if "--offline" not in _run([tool, "--help"]).stdout:
        pytest.skip("systemd-analyze security --offline needs systemd >= 250")
    copies = _copy_with_real_executables(tmp_path)
    services = [copy for copy in copies if copy.suffix == ".service"]
    result = _run(
        [tool, "security", "--offline=true", "--no-pager", *map(str, services)], cwd=tmp_path
    )
    output = result.stdout + result.stderr
    scores = dict(re.findall(r"Overall exposure level for (\S+): (\d+(?:\.\d+)?)", output))
    assert set(scores) == set(SERVICES), output
    for name, score in scores.items():
        # 1.6-1.8 today; systemd calls < 2 "OK", 2-4.9 "MEDIUM". Catch a lost setting.
        assert float(score) <= 2.5, f"{name}: exposure {score}\n{output}"


def test_sysusers_file_creates_the_lockwarden_user(tmp_path: Path) -> None:
    tool = _tool("systemd-sysusers")
    (tmp_path / "etc").mkdir()
    for name in ("passwd", "group", "shadow", "gshadow"):
        (tmp_path / "etc" / name).write_text("")
    result = _run([tool, f"--root={tmp_path}", str(UNIT_DIR / "lockwarden.sysusers")])
    assert result.returncode == 0, result.stderr
    passwd = (tmp_path / "etc" / "passwd").read_text()
    group = (tmp_path / "etc" / "group").read_text()
    user = next(line for line in passwd.splitlines() if line.startswith("lockwarden:"))
    fields = user.split(":")
    assert fields[5] == STATE_DIR and fields[6].endswith("nologin")
    lockwarden = next(line for line in group.splitlines() if line.startswith("lockwarden:"))
    assert fields[3] == lockwarden.split(":")[2], "the user's primary group is lockwarden"
    rapi = next(line for line in passwd.splitlines() if line.startswith("lockwarden-rapi:"))
    assert rapi.split(":")[5] == RAPI_STATE_DIR
    assert lockwarden.split(":")[3].split(",") == ["lockwarden-rapi"], "rapi reaches the sockets"
