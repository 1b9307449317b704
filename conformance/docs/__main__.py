"""``python -m pullspec.conformance.docs build``: the site's commands (`conformance.docs.build`)."""

from pullspec.conformance.docs.build import main

main()
