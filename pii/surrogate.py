"""Surrogates: realistic fakes of detected PII, of the same format, consistent within a run.

:class:`Surrogator` derives each fake from an HMAC-SHA256 of the (normalised) original value keyed by a
secret, so the same phone number gets the same fake everywhere in a run (documents stay coherent) while
the mapping cannot be reversed or recomputed without the secret. The secret comes from the environment
variable ``KPLM_PII_SECRET`` when set (to keep fakes stable across runs and worker processes) and is
otherwise drawn at random per Surrogator; it is never written out: the object's ``repr``/``str`` hide it,
so datatrove's ``executor.json`` and kplm's run records cannot leak it.

Fakes keep the original's separators and layout and pass the validators of the detector: RRN/FRN get a
real birth date and the right check digit, cards keep their 4-digit issuer prefix and get a Luhn digit,
BRNs get their check digit, e-mails use the reserved ``example.com/.net/.org`` domains and IPs the
documentation ranges (RFC 5737), which are never anyone's address.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import os
import random
import re
import secrets

from kplm.pii.recognizers import PHONE_PATTERN
from kplm.pii.validators import (
    brn_check_digit,
    frn_check_digit,
    luhn_check_digit,
    rrn_check_digit,
)

SECRET_ENV = "KPLM_PII_SECRET"
_NON_DIGIT = re.compile(r"[^0-9]")
_EMAIL_WORDS = ("sky", "blue", "happy", "star", "moon", "river", "green", "sunny", "cloud", "forest")
_EMAIL_DOMAINS = ("example.com", "example.net", "example.org")
_TEST_NETS = ("192.0.2", "198.51.100", "203.0.113")
_HANGUL_START = "가나다라마바사아자차카타파하" + "".join(chr(c) for c in range(0xAC00, 0xD7A4))
_CITIES = (
    ("서울특별시", "중구"),
    ("부산광역시", "동래구"),
    ("대구광역시", "수성구"),
    ("경기도 수원시", "팔달구"),
    ("인천광역시", "연수구"),
    ("광주광역시", "북구"),
)
_ROADS = ("새빛", "한울", "솔내", "가람", "누리", "다솜", "별빛", "미리내", "온새미", "푸른숲")
_SURNAMES = "김이박최정강조윤장임한오서신권황안송류홍"
_GIVEN = "민서지현우준도윤하은수영진호성재연아주원희경태"
_FOLD = {cp: cp - 0xFEE0 for cp in range(0xFF01, 0xFF5F)}


def _put_digits(original: str, digits: str) -> str:
    """Write ``digits`` into the digit positions of ``original``, keeping every other character."""
    it = iter(digits)
    return "".join(next(it) if ch.isdigit() else ch for ch in original)


class Surrogator:
    """Makes deterministic, format-preserving fakes of PII values; the HMAC key never leaves the object."""

    __slots__ = ("_key",)

    def __init__(self, key: bytes | str | None = None):
        if key is None:
            env = os.environ.get(SECRET_ENV)
            key = env if env else secrets.token_bytes(32)
        if isinstance(key, str):
            key = key.encode("utf-8")
        if not key:
            raise ValueError("surrogate secret: must not be empty")
        self._key = key

    def __repr__(self) -> str:
        return "Surrogator(key=<hidden>)"

    __str__ = __repr__

    def __getstate__(self) -> bytes:
        return self._key

    def __setstate__(self, state: bytes) -> None:
        self._key = state

    def _rng(self, kind: str, value: str) -> random.Random:
        digest = hmac.new(self._key, f"{kind}\x00{value}".encode(), hashlib.sha256).digest()
        return random.Random(int.from_bytes(digest, "big"))

    def fake(self, kind: str, original: str) -> str | None:
        """A fake for ``original`` of type ``kind``, or None when kplm has no generator for that type."""
        original = original.translate(_FOLD)
        maker = getattr(self, f"_fake_{kind.lower()}", None)
        return maker(original) if maker else None

    def _fake_phone(self, original: str) -> str:
        m = PHONE_PATTERN.fullmatch(original)
        digits = _NON_DIGIT.sub("", original)
        if m is None:  # not in a shape the detector produces: keep the first 3 digits, redraw the rest
            rng = self._rng("PHONE", digits)
            return _put_digits(original, digits[:3] + "".join(rng.choice("0123456789") for _ in digits[3:]))
        if m["svc"]:
            kept, subscriber = m["svc"], m["svc2"]
        else:
            kept = _NON_DIGIT.sub("", original[: m.start("mid")])
            subscriber = m["mid"] + m["last"]
        national = "0" + kept[2:].lstrip("0") if m["intl"] else kept
        rng = self._rng("PHONE", national + subscriber)
        new = [rng.choice("0123456789") for _ in subscriber]
        if not m["svc"]:
            new[0] = rng.choice("23456789")
        return _put_digits(original, kept + "".join(new))

    def _fake_email(self, original: str) -> str:
        rng = self._rng("EMAIL", original.lower())
        local = f"{rng.choice(_EMAIL_WORDS)}{rng.randrange(10, 10000)}"
        return f"{local}@{rng.choice(_EMAIL_DOMAINS)}"

    def _fake_id(self, kind: str, original: str) -> str:
        digits = _NON_DIGIT.sub("", original)
        rng = self._rng("RRN", digits)  # one namespace: the same number maps alike whatever its label
        born = datetime.date(1940, 1, 1) + datetime.timedelta(days=rng.randrange(365 * 65))
        foreign = kind == "FRN"
        g = (5 if foreign else 1) + (2 if born.year >= 2000 else 0) + rng.randrange(2)
        body = born.strftime("%y%m%d") + str(g) + "".join(rng.choice("0123456789") for _ in range(5))
        check = frn_check_digit(body) if foreign else rrn_check_digit(body)
        return _put_digits(original, body + str(check))

    def _fake_rrn(self, original: str) -> str:
        return self._fake_id("RRN", original)

    def _fake_frn(self, original: str) -> str:
        return self._fake_id("FRN", original)

    def _fake_card(self, original: str) -> str:
        digits = _NON_DIGIT.sub("", original)
        rng = self._rng("CARD", digits)
        body = digits[:4] + "".join(rng.choice("0123456789") for _ in digits[4:-1])
        return _put_digits(original, body + str(luhn_check_digit(body)))

    def _fake_brn(self, original: str) -> str:
        rng = self._rng("BRN", _NON_DIGIT.sub("", original))
        body = f"{rng.randrange(101, 1000)}{rng.randrange(1, 100):02d}{rng.randrange(10000):04d}"
        return _put_digits(original, body + str(brn_check_digit(body)))

    def _fake_ip(self, original: str) -> str:
        rng = self._rng("IP", original.lower())
        if ":" in original:  # IPv6: the documentation prefix 2001:db8::/32 (RFC 3849)
            return (
                "2001:db8:"
                + ":".join(f"{rng.randrange(65536):x}" for _ in range(3))
                + "::"
                + f"{rng.randrange(1, 65536):x}"
            )
        return f"{rng.choice(_TEST_NETS)}.{rng.randrange(1, 255)}"

    def _redraw_digits(self, kind: str, original: str, keep: int = 0) -> str:
        """``original`` with every digit after the first ``keep`` redrawn (layout and letters kept)."""
        digits = _NON_DIGIT.sub("", original)
        rng = self._rng(kind, original.upper())
        return _put_digits(original, digits[:keep] + "".join(rng.choice("0123456789") for _ in digits[keep:]))

    def _fake_account(self, original: str) -> str:
        return self._redraw_digits("ACCOUNT", original)

    def _fake_passport(self, original: str) -> str:
        return self._redraw_digits("PASSPORT", original)

    def _fake_driver_license(self, original: str) -> str:
        # keep the region (code or name), redraw year, serial and check digits
        return self._redraw_digits("DRIVER_LICENSE", original, keep=0 if original[0] in _HANGUL_START else 2)

    def _fake_url(self, original: str) -> str:
        rng = self._rng("URL", original)
        return f"https://{rng.choice(_EMAIL_DOMAINS)}/{rng.choice(_EMAIL_WORDS)}/{rng.randrange(10, 100000)}"

    def _fake_address(self, original: str) -> str:
        rng = self._rng("ADDRESS", " ".join(original.split()))
        city, district = rng.choice(_CITIES)
        return f"{city} {district} {rng.choice(_ROADS)}{rng.choice('로길')} {rng.randrange(1, 300)}"

    def _fake_person(self, original: str) -> str:
        rng = self._rng("PERSON", original)
        surname = rng.choice(_SURNAMES)
        if len(original) == 1:  # a surname alone (김 교수, 박씨) stays a surname alone
            return surname
        return surname + "".join(rng.choice(_GIVEN) for _ in range(max(1, len(original) - 1)))
