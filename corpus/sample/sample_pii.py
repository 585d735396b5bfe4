"""Generated fake PII for the kplm sample corpus (helper of ``make_sample.py``).

Every value is made up: numbers are drawn from a seeded ``random.Random`` and every e-mail address is at an
``example.com`` / ``example.org`` / ``example.net`` domain (reserved for documentation, RFC 2606). Formats rotate so
that each one the PII stage should recognise appears: dashed, spaced, bare and ``+82`` mobile numbers, Seoul and
regional landlines, 15xx service numbers, resident registration numbers with and without a valid check digit,
Luhn-valid card numbers and bank account numbers in the layouts of several Korean banks.
"""

from __future__ import annotations

import random
import re
from collections import Counter

PII_FIELD = re.compile(r"\{([A-Z]+)(?::([A-Za-z0-9._-]+))?\}")
NAME_MARK = re.compile(r"\{([가-힣]{2,4})\}")

MOBILE_FORMATS = (
    "010-{a}-{b}",
    "010 {a} {b}",
    "010{a}{b}",
    "+82 10-{a}-{b}",
    "010.{a}.{b}",
    "+82-10-{a}-{b}",
    "011-{c}-{b}",
)
LANDLINE_FORMATS = (
    "({area}) {c}-{b}",
    "{area}-{a}-{b}",
    "{area}-{c}-{b}",
    "{area}) {c}-{b}",
    "{area} {a} {b}",
)
AREA_CODES = ("02", "031", "051", "032", "053", "062", "042", "064")
SERVICE_PREFIXES = ("1588", "1577", "1644", "1899", "1600", "1566")
EMAIL_LOCALS = (
    "minsu.kim",
    "jh_lee92",
    "sky.blue77",
    "haesol.market",
    "yuna0412",
    "privacy",
    "recruit",
    "hello",
    "dowon.kang",
    "bookworm_ha",
)
EMAIL_DOMAINS = ("example.com", "example.org", "example.net", "mail.example.com", "shop.example.org")
# Bank names with their account-number layouts; '#' is a random digit.
BANKS = (
    ("신한은행", "110-###-######"),
    ("국민은행", "######-##-######"),
    ("우리은행", "1002-###-######"),
    ("농협", "3##-####-####-##"),
    ("카카오뱅크", "3333-##-#######"),
    ("하나은행", "###-######-#####"),
    ("기업은행", "###-######-##-###"),
)
RRN_WEIGHTS = (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5)


def rrn_check_digit(first12: str) -> int:
    """Check digit of a resident registration number from its first 12 digits."""
    total = sum(int(c) * w for c, w in zip(first12, RRN_WEIGHTS, strict=True))
    return (11 - total % 11) % 10


def luhn_check_digit(partial: str) -> int:
    """The digit that makes ``partial + digit`` pass the Luhn check."""
    total = 0
    for i, c in enumerate(reversed(partial)):
        d = int(c)
        if i % 2 == 0:
            d = d * 2 - 9 if d * 2 > 9 else d * 2
        total += d
    return (10 - total % 10) % 10


class FakePII:
    """Makes fake PII values, rotating through the formats of each kind."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.turn: Counter[str] = Counter()

    def _digits(self, n: int, first: str = "0123456789") -> str:
        return self.rng.choice(first) + "".join(self.rng.choice("0123456789") for _ in range(n - 1))

    def _next(self, kind: str, options: tuple) -> object:
        self.turn[kind] += 1
        return options[(self.turn[kind] - 1) % len(options)]

    def mobile(self) -> str:
        fmt = self._next("mobile", MOBILE_FORMATS)
        return fmt.format(a=self._digits(4, "23456789"), b=self._digits(4), c=self._digits(3, "23456789"))

    def landline(self) -> str:
        fmt = self._next("landline", LANDLINE_FORMATS)
        area = self._next("area", AREA_CODES)
        return fmt.format(
            area=area, a=self._digits(4, "23456789"), b=self._digits(4), c=self._digits(3, "23456789")
        )

    def service_number(self) -> str:
        return f"{self._next('service', SERVICE_PREFIXES)}-{self._digits(4)}"

    def email(self, local: str | None = None) -> str:
        local = local or str(self._next("local", EMAIL_LOCALS))
        return f"{local}@{self._next('domain', EMAIL_DOMAINS)}"

    def rrn(self) -> tuple[str, bool]:
        """A resident registration number; every other one has a wrong check digit."""
        valid = self.turn["rrn"] % 2 == 0
        self.turn["rrn"] += 1
        year = self.rng.randint(1952, 2008)
        gender = self.rng.choice("12" if year < 2000 else "34")
        first12 = f"{year % 100:02d}{self.rng.randint(1, 12):02d}{self.rng.randint(1, 28):02d}{gender}"
        first12 += self._digits(5)
        check = rrn_check_digit(first12)
        if not valid:
            check = (check + self.rng.randint(1, 9)) % 10
        sep = "" if self.turn["rrn"] % 3 == 0 else "-"
        return f"{first12[:6]}{sep}{first12[6:]}{check}", valid

    def card(self) -> str:
        """A Luhn-valid 16-digit card number, grouped by dashes, spaces or nothing."""
        prefix = str(self._next("card_prefix", ("4", "5", "9410", "35")))
        if prefix == "5":
            prefix += self.rng.choice("12345")
        partial = prefix + self._digits(15 - len(prefix))
        number = partial + str(luhn_check_digit(partial))
        sep = str(self._next("card_sep", ("-", " ", "-", "")))
        return sep.join(number[i : i + 4] for i in range(0, 16, 4))

    def account(self) -> str:
        bank, layout = self._next("bank", BANKS)
        return f"{bank} " + "".join(self.rng.choice("0123456789") if ch == "#" else ch for ch in layout)

    def fill(self, text: str) -> tuple[str, list[tuple[str, str, bool | None]]]:
        """Replace the ``{FIELD}`` and ``{이름}`` marks of a base document; returns the text and its PII items."""
        items: list[tuple[str, str, bool | None]] = []

        def field(m: re.Match) -> str:
            kind, arg = m.group(1), m.group(2)
            valid: bool | None = None
            if kind == "MOBILE":
                value = self.mobile()
            elif kind == "LANDLINE":
                value = self.landline()
            elif kind == "REPNUM":
                value = self.service_number()
            elif kind == "EMAIL":
                value = self.email(arg)
            elif kind == "RRN":
                value, valid = self.rrn()
            elif kind == "CARD":
                value = self.card()
            elif kind == "ACCOUNT":
                value = self.account()
            else:
                raise ValueError(f"unknown PII field {{{kind}}}")
            items.append((KIND_NAMES[kind], value, valid))
            return value

        def name(m: re.Match) -> str:
            items.append(("name", m.group(1), None))
            return m.group(1)

        text = PII_FIELD.sub(field, text)
        return NAME_MARK.sub(name, text), items


KIND_NAMES = {
    "MOBILE": "mobile_phone",
    "LANDLINE": "landline_phone",
    "REPNUM": "service_phone",
    "EMAIL": "email",
    "RRN": "resident_registration_number",
    "CARD": "card_number",
    "ACCOUNT": "bank_account",
}
