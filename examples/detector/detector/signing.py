"""Ed25519 keys for snapshots: the detector signs the exact stored bytes, agents verify.

The key is a 32-byte seed given as hex (``DETECTOR_SIGNING_KEY`` for worker
processes); :func:`generate_seed` makes one for a demo or a test.
"""

from __future__ import annotations

import os

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

__all__ = ["Signer", "generate_seed", "verify"]


def generate_seed() -> str:
    """A new random Ed25519 seed, as hex."""
    return os.urandom(32).hex()


class Signer:
    """Signs snapshot bytes with one Ed25519 key."""

    def __init__(self, seed_hex: str) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(seed_hex))
        self.public_key: bytes = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        """The raw public key agents verify with."""

    def sign(self, body: bytes) -> bytes:
        """The signature of ``body``."""
        return self._key.sign(body)


def verify(public_key: bytes, body: bytes, signature: bytes) -> bool:
    """True when ``signature`` is ``public_key``'s signature of exactly ``body``."""
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, body)
    except (InvalidSignature, ValueError):
        return False
    return True
