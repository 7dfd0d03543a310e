"""Settings of the host project that runs django-helpdesk for the world compiler (ours; helpdesk is not).

HOST_DB chooses the database: ``sqlite:PATH`` (``manage.py migrate`` there is how the compiler reads the
schema the application's own migrations make) or a PostgreSQL conninfo (the world's database, whose tables
the world's backend made from that schema in its three types: see ``dbcompat``). HOST_CLOCK is the world's
frozen clock and HOST_SEED the seed of the application's random values (``determinism``).
"""

import os

from hostproject import determinism

determinism.install(os.environ.get("HOST_CLOCK", "2025-06-30T12:00:00Z"), os.environ.get("HOST_SEED", "0"))

BASE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SECRET_KEY = "rehearsal-compile-host-not-a-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.sites",
    "django.contrib.humanize",
    "django.contrib.messages",
    "rest_framework",
    "helpdesk",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "hostproject.urls"
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [], "APP_DIRS": True,
              "OPTIONS": {"context_processors": ["django.template.context_processors.request",
                                                 "django.contrib.auth.context_processors.auth",
                                                 "django.contrib.messages.context_processors.messages"]}}]
_DB = os.environ.get("HOST_DB", "sqlite:" + os.path.join(BASE_DIR, "db.sqlite3"))
if _DB.startswith("sqlite:"):
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": _DB[len("sqlite:"):]}}
else:
    from psycopg.conninfo import conninfo_to_dict

    _info = conninfo_to_dict(_DB)
    DATABASES = {"default": {"ENGINE": "dbcompat", "NAME": _info.pop("dbname"), "USER": _info.pop("user", ""),
                             "PASSWORD": _info.pop("password", ""), "HOST": _info.pop("host", ""),
                             "PORT": _info.pop("port", ""), "OPTIONS": _info, "CONN_MAX_AGE": 0}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"
SITE_ID = 1
# A fast hasher: the seed's password hashes are made with it, and no login rewrites one (must_update is false).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
DEFAULT_FROM_EMAIL = "helpdesk@example.test"
HELPDESK_API_ENABLED = True
HELPDESK_TEAMS_MODE_ENABLED = False  # teams need pinax-teams, which helpdesk does not install
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["rest_framework.authentication.BasicAuthentication"],
    "DEFAULT_SCHEMA_CLASS": "rest_framework.schemas.openapi.AutoSchema",
}
MEDIA_ROOT = os.environ.get("HOST_MEDIA", "/tmp/rehearsal-helpdesk-media")
STATIC_URL = "/static/"
LOGGING = {"version": 1, "disable_existing_loggers": False,
           "handlers": {"console": {"class": "logging.StreamHandler"}},
           "root": {"handlers": ["console"], "level": "WARNING"}}
