"""The signup example's URLs."""

from django.urls import path

from accounts import views

urlpatterns = [path("signup", views.signup)]
