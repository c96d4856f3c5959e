from django.urls import path

from .shop.views import signup

urlpatterns = [path("signup", signup)]
