"""MQTT 3.1.1 clients, served as nats-server serves them (its server/mqtt.go and
README-MQTT.md): MQTT topics are NATS subjects, so MQTT devices and NATS clients exchange
messages both ways, and what must survive a connection (sessions, QoS 1 messages, retained
messages) lives in JetStream streams of the client's account, in nats-server's names and formats.

- subsystem.py   the `mqtt {}` block, the listener, authentication, /varz
- connection.py  one client connection: packets in order, CONNECT, PUBLISH, SUBSCRIBE, wills
- sessions.py    an account's session manager and its streams; a session; retained messages
- jsa.py         the JetStream requests MQTT makes for an account
- packets.py     the packet codec
- topics.py      topics and subjects, both ways
- sparkplug.py   Sparkplug B's BIRTH certificates and DEATH timestamps
- tasks.py       steps that wait for JetStream, written as generators

The core hands an MQTT connection's bytes to the handler (`Connection.raw_reader`); deliveries
reach MQTT subscribers through internal subscriptions (owned by the connection, so /connz and
/subsz list them under it).
"""
