"""A minimal Django project that enqueues with lazarus and runs a worker as a management
command (docs/frameworks.md). Redis comes from ``LAZARUS_REDIS_URL``."""

import os

SECRET_KEY = "example-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost", "127.0.0.1"]
INSTALLED_APPS = ["examples.django_app.shop"]
ROOT_URLCONF = "examples.django_app.urls"
USE_TZ = True
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"

LAZARUS_REDIS_URL = os.environ.get("LAZARUS_REDIS_URL", "redis://localhost:6379/0")
LAZARUS_PREFIX = os.environ.get("LAZARUS_PREFIX", "lazarus")
