"""The Dask cluster a drill runs its simulator cases on, private to the drill's user.

Every connection is mutual TLS (`distributed.security.Security`, `require_encryption`): for a
`LocalCluster` a CA made for this drill signs one certificate that the scheduler, the workers
and the client present; the CA's key is never written (nothing else can be signed with it),
the certificate's key is written 0600 into a directory `mkdtemp` makes 0700 for this drill,
and both are gone when the drill ends. A process without that key cannot open a connection
to the scheduler, a worker or a nanny (its TLS handshake is refused), so no local user can
submit work to the cluster (`client.run` on a plain TCP cluster ran code as the drill's
user, root included). No node serves HTTP: the scheduler and the workers of `distributed`
start an HTTP server (dashboard, /health, /metrics, on 127.0.0.1:8787 and a port per worker)
whatever `dashboard_address` says; the `Scheduler` and `Worker` here start none.

An external cluster (`--scheduler tls://HOST:PORT`) is used only over TLS with the
credentials given (`--tls-ca`, `--tls-cert`, `--tls-key`), docs/drills.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import logging
import os
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distributed import Scheduler, Worker

from twin.errors import InputError

if TYPE_CHECKING:
    from distributed import SpecCluster
    from distributed.security import Security

NAME = "twin-drill"
"""The certificates' common name (workers are reached by address: names are not checked)."""
VALID = datetime.timedelta(days=2)
"""How long the drill's certificates are valid: a drill ends long before."""


QUIET = {"distributed.worker.profile.enabled": False}
"""The drill's workers do not sample their own stacks (every 10 ms by default, for a
dashboard the drill does not serve): CPU the cases take instead."""


class PrivateScheduler(Scheduler):
    """A scheduler that serves no HTTP (no dashboard, no /health, no /metrics)."""

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        """Nothing: the drill reads the cluster through its TLS client only."""


class PrivateWorker(Worker):
    """A worker that serves no HTTP and holds no capability (`drop_capabilities`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        drop_capabilities()
        super().__init__(*args, **kwargs)

    def start_http_server(self, *args: Any, **kwargs: Any) -> None:
        """Nothing."""


PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
CAPABILITY_VERSION_3 = 0x20080522


def drop_capabilities() -> None:
    """Give up every capability for good (effective, permitted, inheritable, the bounding
    set; no new privileges on exec): a worker as root keeps only what its user id owns
    (the simulator needs nothing more), so no network or namespace admin, no module
    loading, no ptrace, no reading or writing other users' files past their modes. Running
    the workers as another user is not done: the Python of the project's machines lives
    under /root (0700), and the simulator's modules load lazily."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    for cap in range(last + 1):
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable: twice 32 bits, none
    if libc.capset(header, data) != 0 or libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "the drill's worker could not drop its capabilities")


def _credentials(directory: Path) -> Credentials:
    """A CA made here and a certificate it signs, as ca.pem, cert.pem and key.pem (0600) in
    `directory`; the CA's key is dropped."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def certificate(
        subject: str, key: ec.EllipticCurvePrivateKey, issuer: str, signer: Any, ca: bool
    ) -> x509.Certificate:
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + VALID)
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
            .sign(signer, hashes.SHA256())
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate(f"{NAME} CA", ca_key, f"{NAME} CA", ca_key, True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = certificate(NAME, key, f"{NAME} CA", ca_key, False)
    pem = serialization.Encoding.PEM
    files = {
        "ca.pem": ca.public_bytes(pem),
        "cert.pem": cert.public_bytes(pem),
        "key.pem": key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    }
    for name, data in files.items():
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(data)
    return Credentials(directory / "ca.pem", directory / "cert.pem", directory / "key.pem")


@dataclass(frozen=True)
class Credentials:
    """A cluster's CA, a certificate it signed and that certificate's key (PEM files)."""

    ca: Path
    cert: Path
    key: Path

    def security(self) -> Security:
        """Mutual TLS for every role (client, scheduler, worker) with these files."""
        from distributed.security import Security

        roles = ("client", "scheduler", "worker")
        files = {f"tls_{r}_cert": str(self.cert) for r in roles}
        files |= {f"tls_{r}_key": str(self.key) for r in roles}
        return Security(require_encryption=True, tls_ca_file=str(self.ca), **files)


def external(address: str, ca: Path | None, cert: Path | None, key: Path | None) -> Security:
    """The security of a cluster given by address: TLS only, with credentials that exist and
    a key only its owner reads; one line otherwise."""
    if not address.startswith("tls://"):
        raise InputError(
            "--scheduler",
            address,
            "give tls://HOST:PORT and --tls-ca, --tls-cert, --tls-key: a cluster without TLS "
            "runs code for any process that reaches it (docs/drills.md)",
        )
    given = {"--tls-ca": ca, "--tls-cert": cert, "--tls-key": key}
    for option, path in given.items():
        if path is None:
            raise InputError("--scheduler", address, f"needs {option} (TLS: docs/drills.md)")
        if not path.is_file():
            raise InputError(option, str(path), "no such file")
    assert ca is not None and cert is not None and key is not None
    if stat.S_IMODE(key.stat().st_mode) & 0o077:
        raise InputError("--tls-key", str(key), "readable by others: chmod 600 it")
    return Credentials(ca, cert, key).security()


@contextlib.contextmanager
def local(workers: int) -> Iterator[tuple[SpecCluster, Credentials]]:
    """A cluster of `workers` processes on 127.0.0.1, TLS only, no HTTP, workers without
    capabilities; its credentials and the workers' directories made for it (in a 0700
    directory of its own) and removed with it."""
    import dask
    from distributed import Nanny, SpecCluster

    with (
        tempfile.TemporaryDirectory(prefix="twin-drill-tls-") as tmp,  # 0700, made fresh
        dask.config.set(QUIET),  # the nannies hand their config to their workers
    ):
        credentials = _credentials(Path(tmp))
        secured = credentials.security()
        scratch = Path(tmp) / "workers"  # not /tmp/dask-scratch-space: any user can make that
        scratch.mkdir(mode=0o700)
        common = {"security": secured, "host": "127.0.0.1", "protocol": "tls://"}
        worker = {
            "cls": Nanny,
            "options": {
                **common,
                "nthreads": 1,
                "worker_class": PrivateWorker,
                "local_directory": str(scratch),
                "dashboard": False,
                "silence_logs": logging.CRITICAL,
            },
        }
        with SpecCluster(
            scheduler={
                "cls": PrivateScheduler,
                "options": {**common, "dashboard": False, "port": 0},
            },
            workers={i: worker for i in range(workers)},
            security=secured,
            silence_logs=logging.CRITICAL,
        ) as cluster:
            yield cluster, credentials


def dask_setup(server: Any) -> None:
    """`dask scheduler --preload twin.drill.cluster` (and `dask worker`): the node's HTTP
    server closed once it has started (the stock commands open one, dashboard or not)."""
    http = getattr(server, "http_server", None)
    if http is not None:
        http.stop()
        server.services.pop("dashboard", None)
