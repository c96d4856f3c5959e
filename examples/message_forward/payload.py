"""``ForwardJob``: the payload shared by the producer and the consumer."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

MediaType = Literal["photo", "video", "document", "audio", "animation", "voice", "sticker"]


class _Model(BaseModel):
    # JSON in camelCase (messageId), Python in snake_case (message_id); unknown fields refused.
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class MediaItem(_Model):
    """One item of a media group."""

    media_type: MediaType
    media_file_id: str = Field(min_length=1, max_length=256)
    caption: str | None = Field(default=None, max_length=1024)


class ForwardJob(_Model):
    """One message to forward: its identity, its source channel, its content, and when it was
    sent. Each message of a media group is a job of its own; grouping them is the
    forwarder's business."""

    message_id: int = Field(gt=0)
    source_channel_id: int
    text: str | None = Field(default=None, max_length=4096)
    caption: str | None = Field(default=None, max_length=1024)
    media_type: MediaType | None = None
    media_file_id: str | None = Field(default=None, min_length=1, max_length=256)
    media_group_id: str | None = Field(default=None, min_length=1, max_length=64)
    media_group: list[MediaItem] | None = Field(default=None, max_length=10)
    timestamp: AwareDatetime

    def job_id(self) -> str:
        """The job's id: one job per message, so a message sent twice is queued once."""
        return f"{self.source_channel_id}-{self.message_id}"


def example(message_id: int = 42, channel: int = -1001234567890) -> ForwardJob:
    """A photo message, as the README shows it."""
    return ForwardJob(
        message_id=message_id,
        source_channel_id=channel,
        caption="Sunrise over the harbour",
        media_type="photo",
        media_file_id="AgACAgQAAxkBAAIBQ2Zx",
        timestamp=datetime.fromisoformat("2026-02-17T09:30:00+00:00"),
    )
