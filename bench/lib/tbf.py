"""The token bucket (tc tbf) a simulated host's link gets: one formula for
bench/lib/sim_hosts.sh, which configures it, and bench/lib/scaling_model.py,
which models it.

    python3 bench/lib/tbf.py 10gbit     # prints the burst in bytes
"""
import re
import sys


def burst(rate):
    """Bytes tbf may let out at once on a link of `rate` ("10gbit",
    "2500mbit"): 1 ms at the rate, at least 64 KiB."""
    m = re.fullmatch(r"(\d+)(gbit|mbit)", rate)
    if not m:
        raise ValueError(f"rate '{rate}' is not <number>gbit or <number>mbit")
    bits = int(m[1]) * (10**9 if m[2] == "gbit" else 10**6)
    return max(65536, bits // 8 // 1000)


if __name__ == "__main__":
    print(burst(sys.argv[1]))
