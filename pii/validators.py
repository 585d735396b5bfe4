"""Checksums and validity checks for Korean identifiers, shared by detection and surrogate generation.

Every function takes the digits of a candidate as a plain ASCII string (no separators) and is pure, so
the detector can call them on every regex match and the surrogate generator can use the same rules to
produce fakes that pass them.
"""

from __future__ import annotations

import datetime
import ipaddress

# Weights of the resident registration number check digit (digit 13), over digits 1-12.
_RRN_WEIGHTS = (2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5)
# Weights of the business registration number check digit (digit 10), over digits 1-9.
_BRN_WEIGHTS = (1, 3, 7, 1, 3, 7, 1, 3, 5)

# Gender/century digit (7th digit) of an RRN or FRN -> century of the birth date.
# 1, 2 (citizens) and 5, 6 (foreigners): 1900s; 3, 4 and 7, 8: 2000s. 9 and 0 (1800s) are not accepted.
RRN_CENTURY = {"1": 1900, "2": 1900, "3": 2000, "4": 2000}
FRN_CENTURY = {"5": 1900, "6": 1900, "7": 2000, "8": 2000}


def valid_birth_date(yymmdd: str, century: int) -> bool:
    """True when ``yymmdd`` is a real calendar date in ``century`` (leap years included)."""
    try:
        datetime.date(century + int(yymmdd[:2]), int(yymmdd[2:4]), int(yymmdd[4:6]))
    except ValueError:
        return False
    return True


def rrn_check_digit(first12: str) -> int:
    """The check digit of a citizen RRN (주민등록번호) from its first 12 digits."""
    total = sum(int(d) * w for d, w in zip(first12, _RRN_WEIGHTS, strict=True))
    return (11 - total % 11) % 10


def frn_check_digit(first12: str) -> int:
    """The check digit of a foreigner registration number (외국인등록번호) from its first 12 digits."""
    total = sum(int(d) * w for d, w in zip(first12, _RRN_WEIGHTS, strict=True))
    return (13 - total % 11) % 10


def rrn_checksum_ok(digits: str) -> bool:
    """True when a 13-digit RRN or FRN carries the check digit its kind prescribes.

    Numbers issued since October 2020 have a random last digit, so a failed checksum does not mean the
    number is not an RRN; the detector only uses this to raise its confidence.
    """
    if len(digits) != 13 or not digits.isdigit():
        return False
    check = frn_check_digit(digits[:12]) if digits[6] in FRN_CENTURY else rrn_check_digit(digits[:12])
    return int(digits[12]) == check


def luhn_ok(digits: str) -> bool:
    """The Luhn (mod 10) check used by payment card numbers."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def luhn_check_digit(body: str) -> int:
    """The digit that makes ``body + digit`` Luhn-valid."""
    for d in range(10):
        if luhn_ok(body + str(d)):
            return d
    raise AssertionError("unreachable: one of ten digits always completes a Luhn sum")


def card_network_ok(digits: str) -> bool:
    """True when the length and issuer prefix fit a known card network.

    Visa 4 (13/16/19), Mastercard 51-55 and 2221-2720 (16), Amex 34/37 (15), Diners 30/36/38 (14),
    JCB 35 (16), Discover/UnionPay 6 (16-19) and Korean domestic cards starting with 9 (16).
    """
    n = len(digits)
    first = digits[0]
    if first == "4":
        return n in (13, 16, 19)
    if first == "5":
        return n == 16 and "51" <= digits[:2] <= "55"
    if first == "2":
        return n == 16 and "2221" <= digits[:4] <= "2720"
    if first == "3":
        if digits[:2] in ("34", "37"):
            return n == 15
        if digits[:2] == "35":
            return n == 16
        return n == 14 and digits[:2] in ("30", "36", "38")
    if first == "6":
        return 16 <= n <= 19
    if first == "9":
        return n == 16
    return False


def brn_check_digit(first9: str) -> int:
    """The check digit of a business registration number (사업자등록번호) from its first 9 digits."""
    total = sum(int(d) * w for d, w in zip(first9, _BRN_WEIGHTS, strict=True))
    total += int(first9[8]) * 5 // 10
    return (10 - total % 10) % 10


def brn_ok(digits: str) -> bool:
    """True for a 10-digit business registration number with a valid office code and check digit."""
    if len(digits) != 10 or not digits.isdigit() or digits[:3] < "101" or digits[3:5] == "00":
        return False
    return int(digits[9]) == brn_check_digit(digits[:9])


def public_ipv4(candidate: str) -> bool:
    """True for a dotted IPv4 address without leading zeros that is globally routable (not private/test)."""
    parts = candidate.split(".")
    if len(parts) != 4 or any(len(p) > 1 and p[0] == "0" for p in parts):
        return False
    try:
        return ipaddress.IPv4Address(candidate).is_global
    except ValueError:
        return False


def ean13_ok(digits: str) -> bool:
    """The EAN-13 (GTIN/ISBN-13) check: 13 digits whose weighted 1-3 sum is a multiple of 10."""
    if len(digits) != 13:
        return False
    total = sum(int(d) * (3 if i % 2 else 1) for i, d in enumerate(digits))
    return total % 10 == 0
