// Screenshot checks: a picture of one panel element, compared with a reference committed under
// test/screenshots/ (pixelmatch, with a tolerance for anti-aliasing). UPDATE_SCREENSHOTS=1 writes the
// references instead. A difference over the tolerance fails, and leaves the actual picture and a diff
// image (changed pixels in red) in the artifacts folder.

import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import pixelmatch from "pixelmatch";
import { PNG } from "pngjs";
import { EXT_DIR } from "./vscode.mjs";

export const REFERENCES = join(EXT_DIR, "test/screenshots");
const UPDATE = process.env.UPDATE_SCREENSHOTS === "1";
/** Share of pixels that may differ (after pixelmatch's per-pixel colour threshold). */
const MAX_DIFF_RATIO = 0.01;

/** Pixels the two sizes may differ by (rounding of a fractional layout width). */
const MAX_SIZE_DIFF = 2;

/** The top-left `width`×`height` of an image's RGBA data. */
function crop(image, width, height) {
  if (image.width === width && image.height === height) return image.data;
  const out = Buffer.alloc(width * height * 4);
  for (let y = 0; y < height; y++) image.data.copy(out, y * width * 4, y * image.width * 4, (y * image.width + width) * 4);
  return out;
}

/**
 * Compares `png` (a Buffer) with the reference `name`.png. Returns what happened; throws on a difference
 * over the tolerance or a missing reference (unless updating).
 */
export function compareScreenshot(name, png, artifacts) {
  mkdirSync(artifacts, { recursive: true });
  const reference = join(REFERENCES, `${name}.png`);
  writeFileSync(join(artifacts, `screenshot-${name}.png`), png);
  if (UPDATE) {
    mkdirSync(REFERENCES, { recursive: true });
    writeFileSync(reference, png);
    return "updated";
  }
  if (!existsSync(reference)) {
    throw new Error(`no reference screenshot ${reference}: run with UPDATE_SCREENSHOTS=1 to create it`);
  }
  const actual = PNG.sync.read(png);
  const expected = PNG.sync.read(readFileSync(reference));
  // A layout rounded a pixel differently (a fractional panel width) is the same picture: the common area
  // is compared. More than that is a change.
  if (Math.abs(actual.width - expected.width) > MAX_SIZE_DIFF || Math.abs(actual.height - expected.height) > MAX_SIZE_DIFF) {
    throw new Error(
      `screenshot ${name} is ${actual.width}×${actual.height}, its reference ${expected.width}×${expected.height} ` +
        `(see ${join(artifacts, `screenshot-${name}.png`)}; UPDATE_SCREENSHOTS=1 accepts it)`,
    );
  }
  const width = Math.min(actual.width, expected.width);
  const height = Math.min(actual.height, expected.height);
  const diff = new PNG({ width, height });
  const changed = pixelmatch(crop(actual, width, height), crop(expected, width, height), diff.data, width, height, { threshold: 0.1 });
  const ratio = changed / (width * height);
  if (ratio > MAX_DIFF_RATIO) {
    const diffPath = join(artifacts, `screenshot-${name}-diff.png`);
    writeFileSync(diffPath, PNG.sync.write(diff));
    throw new Error(
      `screenshot ${name} differs from its reference in ${changed} pixels (${(ratio * 100).toFixed(2)}% > ` +
        `${MAX_DIFF_RATIO * 100}%): see ${diffPath}; UPDATE_SCREENSHOTS=1 accepts it`,
    );
  }
  return `same (${changed} pixels differ)`;
}
