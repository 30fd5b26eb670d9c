'use strict';

/**
 * Content beyond text: a run's input as parts (`agent.run([new Text('...'), Image.fromPath(p),
 * File.fromBytes(buf, 'application/pdf', 'report.pdf')])`) and a tool's result with images (a tool
 * returns an `Image`, or an array of parts). Each wire gets them in its own content blocks. The core
 * checks each part before anything is sent: one over its byte cap, or whose bytes are not the media type
 * it names, throws `InvalidMessageError` naming it (`messages[0].parts[1]`).
 */

const fs = require('node:fs');
const path = require('node:path');

const b64 = (data) => Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64');

class Text {
  constructor(text) {
    this.text = String(text);
  }
  toPart() {
    return { type: 'text', text: this.text };
  }
}

class Image {
  /** `data`: the image's bytes (PNG, JPEG, GIF or WebP; `mediaType` omitted reads it from them). */
  constructor({ data, mediaType, url } = {}) {
    if (data == null && url == null) throw new TypeError('an Image needs data or a url');
    if (data != null && !(data instanceof Uint8Array)) throw new TypeError('Image data must be a Buffer or Uint8Array');
    this.data = data ?? null;
    this.mediaType = mediaType ?? null;
    this.url = url ?? null;
  }
  static fromBytes(data, mediaType) {
    return new Image({ data, mediaType });
  }
  static fromPath(file, mediaType) {
    return new Image({ data: fs.readFileSync(file), mediaType });
  }
  static fromUrl(url) {
    return new Image({ url });
  }
  toPart() {
    if (this.url != null) return { type: 'image_url', url: this.url };
    return { type: 'image', media_type: this.mediaType ?? '', data: b64(this.data) };
  }
}

class File {
  /** `data`: a PDF (`application/pdf`) or text (`text/plain`). */
  constructor(data, mediaType, filename = 'file') {
    if (!(data instanceof Uint8Array)) throw new TypeError('File data must be a Buffer or Uint8Array');
    this.data = data;
    this.mediaType = mediaType;
    this.filename = filename;
  }
  static fromBytes(data, mediaType, filename = 'file') {
    return new File(data, mediaType, filename);
  }
  static fromPath(file, mediaType) {
    return new File(fs.readFileSync(file), mediaType, path.basename(file));
  }
  toPart() {
    return { type: 'file', media_type: this.mediaType, filename: this.filename, data: b64(this.data) };
  }
}

function isPart(v) {
  return v instanceof Text || v instanceof Image || v instanceof File;
}

/** A part (a string is text) in the core's JSON form. */
function partJson(v) {
  if (typeof v === 'string') return { type: 'text', text: v };
  if (isPart(v)) return v.toPart();
  throw new TypeError(`a part is a Text, Image, File or string, got ${v === null ? 'null' : typeof v}`);
}

/** A tool's return as the core's content value when it is a part or an array holding one, else `undefined`. */
function toolContent(value) {
  if (isPart(value)) return { $ambit_content: [partJson(value)] };
  if (Array.isArray(value) && value.some(isPart)) return { $ambit_content: value.map(partJson) };
  return undefined;
}

module.exports = { Text, Image, File, isPart, partJson, toolContent };
