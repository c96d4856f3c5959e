from django.http import HttpRequest, JsonResponse

from .jobs import emails


async def signup(request: HttpRequest) -> JsonResponse:
    job = await emails.add("welcome", {"to": request.POST["email"]}, attempts=3)
    return JsonResponse({"job": job.id}, status=202)
