"""The table of monitoring endpoints: path -> handler(query) for one server."""
from natsd.monitor import healthz, varz


def routes(server):
    table = {
        "/varz": lambda q: varz.varz(server, q),
        "/healthz": lambda q: healthz.healthz(server, q),
    }
    table["/"] = lambda q: varz.landing_page(server, sorted(table))
    return table
