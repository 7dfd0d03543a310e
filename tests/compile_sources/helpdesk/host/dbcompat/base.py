"""Django's PostgreSQL backend on a world's database, whose columns have the world's three types (ours).

A world's tables hold ``int``, ``text`` and ``real`` columns only (``rehearsal_env.schema``), the same on
SQLite and PostgreSQL; the world compiler reads them from the schema helpdesk's own migrations make on
SQLite (booleans there are integers, times ISO text, as here). This backend lets Django's PostgreSQL
backend run on such tables: values are sent as Django stores them on SQLite (booleans 0/1, times
and dates ISO text in UTC, durations in microseconds), and
read back through converters by the model field's type; a boolean column is always compared, never used
bare as a condition.
"""

from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal

from django.db.backends.postgresql import base, operations
from django.utils.dateparse import parse_date, parse_datetime, parse_duration, parse_time
from psycopg.adapt import Dumper


class _Text(Dumper):
    oid = 0  # unknown: PostgreSQL takes the column's type (bigint for a flag, text for a time)

    def dump(self, obj):
        if isinstance(obj, bool):
            return b"1" if obj else b"0"
        if isinstance(obj, datetime):  # as Django stores it on SQLite: UTC, without the offset
            if obj.tzinfo is not None:
                obj = obj.astimezone(UTC).replace(tzinfo=None)
            return obj.isoformat(sep=" ").encode()
        if isinstance(obj, timedelta):  # microseconds, as on SQLite
            return str((obj.days * 86400 + obj.seconds) * 1_000_000 + obj.microseconds).encode()
        return obj.isoformat().encode()


def _bool(value, expression, connection):
    return value if value is None else bool(value)


def _datetime(value, expression, connection):
    if isinstance(value, str):
        parsed = parse_datetime(value)
        if parsed is not None and parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        return parsed
    return value


def _date(value, expression, connection):
    return parse_date(value[:10]) if isinstance(value, str) else value


def _time(value, expression, connection):
    return parse_time(value) if isinstance(value, str) else value


def _duration(value, expression, connection):
    if isinstance(value, int):
        return timedelta(microseconds=value)
    return parse_duration(value) if isinstance(value, str) else value


def _decimal(value, expression, connection):
    return Decimal(str(value)) if isinstance(value, float | int) and not isinstance(value, bool) else value


_CONVERTERS = {"BooleanField": _bool, "NullBooleanField": _bool, "DateTimeField": _datetime,
               "DateField": _date, "TimeField": _time, "DurationField": _duration, "DecimalField": _decimal}


class DatabaseOperations(operations.DatabaseOperations):
    def get_db_converters(self, expression):
        converters = super().get_db_converters(expression)
        found = _CONVERTERS.get(expression.output_field.get_internal_type())
        return [*converters, found] if found else converters

    def conditional_expression_supported_in_where_clause(self, expression):
        return False


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

    def get_new_connection(self, conn_params):
        connection = super().get_new_connection(conn_params)
        for kind in (bool, datetime, date, time, timedelta):
            connection.adapters.register_dumper(kind, _Text)
        return connection
