"""A brozzler-like client (Python 3 standard library only), sending what brozzler sends:
a page fetched through the proxy with Warcprox-Meta, then its screenshot and thumbnail pushed
with WARCPROX_WRITE_RECORD exactly as brozzler/worker.py _warcprox_write_record does
(urllib Request with method, request.type = "http", set_proxy)."""
import json
import sys
import urllib.request

proxy, page_url, prefix = sys.argv[1], sys.argv[2], sys.argv[3]
meta = json.dumps({"warc-prefix": prefix, "dedup-buckets": {prefix + "-dedup": "rw"}, "metadata": {"hop_path": None, "brozzled_url": page_url}}, separators=(",", ":"))

# The page itself, through the proxy (as the browser would fetch it).
opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": "http://" + proxy}))
req = urllib.request.Request(page_url, headers={"Warcprox-Meta": meta})
with opener.open(req, timeout=30) as r:
    page = r.read()
# The same payload under another URL: deduplicated in the job's bucket.
req2 = urllib.request.Request(page_url + "?again", headers={"Warcprox-Meta": meta})
with opener.open(req2, timeout=30) as r:
    again = r.read()
assert again == page

def write_record(url, content_type, payload):
    headers = {"Content-Type": content_type, "WARC-Type": "resource", "Host": "N/A", "Warcprox-Meta": meta}
    request = urllib.request.Request(url, method="WARCPROX_WRITE_RECORD", headers=headers, data=payload)
    request.type = "http"
    request.set_proxy(proxy, "http")
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.getcode()

jpeg = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 40 + b"\xff\xd9"
s1 = write_record("screenshot:" + page_url, "image/jpeg", jpeg)
s2 = write_record("thumbnail:" + page_url, "image/jpeg", jpeg[:3000])
print(json.dumps({"page": len(page), "screenshot": s1, "thumbnail": s2}))
