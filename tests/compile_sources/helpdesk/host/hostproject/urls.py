"""The host project's URLs: helpdesk's own (its REST API under /api/), its OpenAPI document as DRF generates
it, a health check and the world's reset hook."""

from django.http import JsonResponse
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt
from rest_framework.schemas.openapi import SchemaGenerator

from hostproject import determinism


class _Generator(SchemaGenerator):
    """DRF's generator of every operation (``public``) builds each view without a request, where helpdesk's
    viewsets need one (they narrow relations to the caller's queues): this one gives each view the caller's."""

    caller = None

    def create_view(self, callback, method, request=None):
        return super().create_view(callback, method, request or self.caller)

    def has_view_permissions(self, path, method, view):
        return True  # the document of every operation; each call is still authorised by the view itself


def openapi(request):
    """DRF's own OpenAPI document of every API operation."""
    from rest_framework.request import Request

    generator = _Generator(title="django-helpdesk API", version="2.6.1")
    generator.caller = Request(request)
    return JsonResponse(generator.get_schema(request=None, public=True))


def health(request):
    return JsonResponse({"ok": True})


@csrf_exempt
def reset(request):
    if request.method != "POST":
        return JsonResponse({"error": "POST only"}, status=405)
    determinism.reseed()
    from django.core import mail

    mail.outbox = []
    return JsonResponse({"reseeded": True})


urlpatterns = [
    path("health", health),
    path("__rehearsal/reset", reset),
    path("openapi.json", openapi),
    path("", include("helpdesk.urls")),
]
