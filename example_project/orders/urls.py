from django.urls import path

from orders import views

app_name = "orders"

urlpatterns = [
    path("", views.index, name="index"),
    path("table/", views.table, name="table"),
    path("place/", views.place, name="place"),
    path("import/", views.import_view, name="import"),
    path("report/", views.report, name="report"),
    path("recalculate/", views.recalculate, name="recalculate"),
    path("tasks/<str:result_id>/", views.task_result, name="task_result"),
]
