"""Command line: ``python -m gpufilt info``, ``python -m gpufilt demo``,
``gpufilt filter SRC DST OP [OP ...]`` (files, block by block), and
``python -m gpufilt --cmake-dir`` / ``--include-dir`` for C++ builds."""
from __future__ import annotations

import argparse
import json
import sys


def _print_info():
    from . import info
    facts = info()
    print(json.dumps(facts, indent=2, default=str))
    cuda = facts["cuda"]
    if cuda["usable"]:
        names = ", ".join(d["name"] for d in cuda["devices"])
        print(f"\nhello from the GPU: {len(cuda['devices'])} usable CUDA device(s): {names}")
    else:
        print(f"\nno usable CUDA device: {cuda['unusable_reason']}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m gpufilt", description=__doc__)
    parser.add_argument("--cmake-dir", action="store_true",
                        help="print the folder of gpufiltConfig.cmake (CMake: gpufilt_DIR) and exit")
    parser.add_argument("--include-dir", action="store_true",
                        help="print the folder of gpufilt's C++ headers and exit")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("info", help="build, CUDA runtime and devices, library versions")
    demo = commands.add_parser("demo", help="filter a synthetic noisy volume on CPU and GPU, "
                                            "check against scipy, time it, write a PNG")
    demo.add_argument("--size", type=int, default=128, help="edge of the cubic volume (default 128)")
    demo.add_argument("--out", default="gpufilt-demo.png", help="where to write the before/after PNG")
    from ._cli_filter import add_parser
    add_parser(commands)
    args = parser.parse_args(argv)
    if args.cmake_dir or args.include_dir:
        from . import get_cmake_dir, get_include
        print(get_cmake_dir() if args.cmake_dir else get_include())
        return 0
    if args.command is None:
        parser.error("a command is required: info, demo or filter (or --cmake-dir / --include-dir)")
    if args.command == "info":
        return _print_info()
    if args.command == "filter":
        from ._cli_filter import main as filter_files
        return filter_files(args)
    from ._demo import run_demo
    return run_demo(size=args.size, png_path=args.out)


if __name__ == "__main__":
    sys.exit(main())
