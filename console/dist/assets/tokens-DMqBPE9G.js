import{b as t}from"./index-DkPnntgG.js";function n(){return t("p",{class:"lead",children:"Not built yet."})}export{n as OwnTokens};
