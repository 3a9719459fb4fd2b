"""Write scikit-learn's 1,797 real 8x8 hand-written digits as PNGs, one folder per class.

python examples/digits/make_images.py /tmp/digits
forgeml data add digits /tmp/digits --format images
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from PIL import Image
from sklearn.datasets import load_digits


def main(out: Path) -> None:
    digits = load_digits()
    for index, (pixels, label) in enumerate(zip(digits.images, digits.target, strict=True)):
        folder = out / str(label)
        folder.mkdir(parents=True, exist_ok=True)
        # the scans hold 0..16 intensities; stretch them to 8-bit grey
        image = Image.fromarray((pixels * 255 / 16).astype(np.uint8), mode="L")
        image.save(folder / f"{index:04d}.png")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("digits-images"))
