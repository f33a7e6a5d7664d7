"""`/healthz`: {"status": "ok"} while the server serves; 503 with the reasons otherwise."""


def _flag(query, name):
    return query.get(name, "").lower() in ("true", "1")


def healthz(server, query):
    errors = []
    if server.shutting_down:
        errors.append({"type": "Server", "error": "server is shutting down"})
    if _flag(query, "js-enabled-only") or _flag(query, "js-server-only"):
        checker = getattr(server, "jetstream_health_errors", None)
        if checker is not None:
            errors.extend(checker(query))
    if errors:
        return 503, {"status": "unavailable", "status_code": 503,
                     "error": errors[0]["error"], "errors": errors}
    return {"status": "ok"}
