"""Content beyond text: a run's input as parts (``agent.run([Text("..."), Image.from_path(p),
File.from_bytes(b, "application/pdf")])``), and a tool's result with images (a tool returns an
:class:`Image`, or a list of parts). Each wire gets them in its own content blocks. The core checks each
part before anything is sent: one over its byte cap, or whose bytes are not the media type it names,
raises :class:`ambit.InvalidMessage` naming it (``messages[0].parts[1]``)."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from typing import Any, Union

__all__ = ["File", "Image", "Part", "Text", "part_to_dict"]


@dataclass(frozen=True)
class Text:
    """Text in a list of parts."""

    text: str

    def to_dict(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}


@dataclass(frozen=True)
class Image:
    """An image: its bytes (PNG, JPEG, GIF or WebP; ``media_type`` ``None`` reads the type from them), or
    a ``url`` the provider fetches."""

    data: bytes | None = None
    media_type: str | None = None
    url: str | None = None

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str | None = None) -> Image:
        return cls(data=bytes(data), media_type=media_type)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], media_type: str | None = None) -> Image:
        with open(path, "rb") as f:
            return cls(data=f.read(), media_type=media_type)

    @classmethod
    def from_url(cls, url: str) -> Image:
        return cls(url=url)

    def to_dict(self) -> dict[str, Any]:
        if self.url is not None:
            return {"type": "image_url", "url": self.url}
        if self.data is None:
            raise ValueError("an Image needs data or a url")
        return {"type": "image", "media_type": self.media_type or "", "data": base64.b64encode(self.data).decode()}


@dataclass(frozen=True)
class File:
    """A document: a PDF (``application/pdf``) or text (``text/plain``), with its filename."""

    data: bytes
    media_type: str
    filename: str = "file"

    @classmethod
    def from_bytes(cls, data: bytes, media_type: str, filename: str = "file") -> File:
        return cls(bytes(data), media_type, filename)

    @classmethod
    def from_path(cls, path: str | os.PathLike[str], media_type: str) -> File:
        with open(path, "rb") as f:
            return cls(f.read(), media_type, os.path.basename(os.fspath(path)))

    def to_dict(self) -> dict[str, Any]:
        return {"type": "file", "media_type": self.media_type, "filename": self.filename,
                "data": base64.b64encode(self.data).decode()}


#: One piece of a message's content.
Part = Union[Text, Image, File]


def part_to_dict(part: Part | str) -> dict[str, Any]:
    """The core's JSON form of a part; a string is a :class:`Text`."""
    if isinstance(part, str):
        return Text(part).to_dict()
    if isinstance(part, (Text, Image, File)):
        return part.to_dict()
    raise TypeError(f"a part is Text, Image, File or a string, got {type(part).__name__}")


def is_part(value: Any) -> bool:
    return isinstance(value, (Text, Image, File))


def tool_content(value: Any) -> dict[str, Any] | None:
    """A tool's return as the core's content value when it is a part or a list holding one, else ``None``."""
    if is_part(value):
        return {"$ambit_content": [part_to_dict(value)]}
    if isinstance(value, (list, tuple)) and any(is_part(v) for v in value):
        return {"$ambit_content": [part_to_dict(v) for v in value]}
    return None
