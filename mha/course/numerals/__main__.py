"""``python -m mha.course.numerals``: Chinese numerals to Arabic digits with the shipped Transformer.

    python -m mha.course.numerals 两千零二十六 三万零五百     # one answer per argument
    printf '十二\\n九千九百九十九万\\n' | python -m mha.course.numerals   # one answer per input line

Every common writing is converted: 二千零二十六, 两百, 一十二, 一百一 (110), 三万五,
贰仟零贰拾陆 (financial 大写). Each input gives exactly one output line: the digits
the model writes, or ``错误：...`` when the input names no number (empty line,
unknown characters, two digits in a row ...: the reason is given); the other lines
are still converted. ``--strict`` accepts only the course's standard readings
(as before); ``--explain`` adds, after a tab, how the input differs from the
standard reading. When the model's digits differ from the number the rules read
(:func:`mha.course.numerals.reader.read`), a tab and ``模型写错了：按读法规则是 N`` follow them.
The exit status is 1 when any input was invalid, else 0.
The model does the conversion and reads the input as written when it was trained on that
writing; :func:`mha.course.numerals.reader.read` checks the input and gives the standard reading
for the few accepted writings outside the training styles (零 left out: 三万五百).
"""
from __future__ import annotations

import argparse
import sys

from . import KINDS, load_pretrained
from .reader import read
from .styles import STYLES, write
from .words import NumeralError, parse


def model_input(text: str, number: int, standard: str) -> str:
    """What the model reads: the text as written when it is one of the writings the model was trained on
    (:mod:`mha.course.numerals.styles`), else the standard reading (零 left out, 拾贰 without 壹, 一百十二 ...)."""
    trained = {write(number, style) for style in STYLES}
    trained.add(write(number, "大写").replace("万", "萬"))  # 大写 with 萬 (ordinary digits with 萬 are not trained)
    return text if text in trained else standard


def convert(lines, model, strict: bool = False, explain: bool = False) -> tuple[list[str], bool]:
    """One output line per input line; returns ``(outputs, all_valid)``."""
    outputs: list[str | None] = []
    valid, notes = [], {}
    for i, line in enumerate(lines):
        text = line.strip()
        try:
            if not text:
                raise NumeralError("空行：请写一个中文数字，例如 两千零二十六")
            if strict:
                parse(text, strict=True)
            reading = read(text)
        except NumeralError as e:
            outputs.append(f"错误：{e}")
            continue
        outputs.append(None)
        valid.append((i, model_input(text, reading.number, reading.standard), reading.number))
        notes[i] = reading.explain()
    if valid:
        answers = model.translate([text for _, text, _ in valid])
        for (i, _, number), answer in zip(valid, answers):
            said = [notes[i]] if explain else []
            if answer != str(number):  # the model is not always right: say so, with the rules' answer
                said.append(f"模型写错了：按读法规则是 {number}")
            outputs[i] = "\t".join([answer, "；".join(said)]) if said else answer
    return outputs, len(valid) == len(outputs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mha.course.numerals",
                                     description="Convert Chinese numerals (0 to 99,999,999) to Arabic digits "
                                                 "with the course's trained Transformer.")
    parser.add_argument("numerals", nargs="*", help="numerals to convert; without any, read one per line from stdin")
    parser.add_argument("--model", choices=KINDS, default="4heads", help="which shipped model to use")
    parser.add_argument("--strict", action="store_true",
                        help="accept only the course's standard readings (两千零二十六, not 二千零二十六)")
    parser.add_argument("--explain", action="store_true",
                        help="after each answer, a tab and how the input differs from the standard reading")
    args = parser.parse_args(argv)
    options = dict(strict=args.strict, explain=args.explain)
    model = load_pretrained(args.model)
    ok = True
    if args.numerals:
        outputs, ok = convert(args.numerals, model, **options)
        print("\n".join(outputs))
    elif sys.stdin.isatty():  # interactive: answer each line as it comes
        for line in sys.stdin:
            outputs, line_ok = convert([line], model, **options)
            print(outputs[0], flush=True)
            ok &= line_ok
    else:
        lines = sys.stdin.read().splitlines()
        outputs, ok = convert(lines, model, **options)
        if outputs:
            print("\n".join(outputs))
    return 0 if ok else 1


def _use_utf8() -> None:
    """Read and write UTF-8 whatever the locale says: the numerals are Chinese, and under an ASCII
    locale (``LC_ALL=C``) printing them would end in a UnicodeEncodeError traceback. Input bytes
    that are not UTF-8 become U+FFFD, which parse() then names as a non-numeral character."""
    sys.stdin.reconfigure(encoding="utf-8", errors="replace")
    sys.stdout.reconfigure(encoding="utf-8")


if __name__ == "__main__":
    _use_utf8()
    sys.exit(main())
